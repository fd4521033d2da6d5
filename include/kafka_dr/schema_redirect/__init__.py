"""Redirecting a datacenter's schema registry to a cluster's `_schemas` store (dr_schema_redirect, and the registry
steps of dr_failover and dr_failback); kafka_dr.schema_registry is the registry client they use."""
