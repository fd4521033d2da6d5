"""Bringing a failed cluster back: what never left it, resync, and the switch back (dr_failback)."""
