"""Backfilling: copy exactly the source records of a window that a flow's target topic lacks, then verify the window
(dr_backfill and spark_jobs/backfill.py)."""
