"""Consumer-offset translation between clusters: exact from provenance, by timestamp as the fallback."""
