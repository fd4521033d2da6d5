"""Bringing replication up between a topology's datacenters and checking it end to end (dr_bringup)."""
