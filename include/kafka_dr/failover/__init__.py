"""Failing over: clients, consumer-group offsets and the schema registry move from a failed cluster to another
(dr_failover, and the switch back of dr_failback)."""
