"""Spark plumbing of kafka-dr's jobs (spark_jobs/*.py), in the order a job meets it:

- submit.py: spark-submit's command and environment, and the package as --py-files for a cluster's executors;
- driver_jvm.py: the driver JVM's start-up options; class_archive.py makes the class archive they map;
- job.py: a job's command-line skeleton (exit codes, JSON summary, --report, the filter overrides);
- session.py: the job's Spark context, started beside the driver's planning and stopped at the end;
- installed_pyspark.py and daemon.py: pyspark imported from its installed files in the driver and the workers.

It depends on the core (topology, clients, replication's errors), never the reverse: only the Airflow side and the
local stack import it (pyproject.toml's import contracts).
"""
