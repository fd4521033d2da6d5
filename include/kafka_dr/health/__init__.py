"""Replication health: samples of each flow, Burrow-style statuses, and kafka-dr's own checks."""
