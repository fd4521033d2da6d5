"""What the tests share: free ports, embedded server processes, the local stack, topology files, Spark jobs
(spark-submit and in-process), the Airflow harness, and small fakes of the confluent-kafka clients.

Imported as `support` (pytest's `pythonpath` puts tests/ on sys.path; the benchmarks run with PYTHONPATH=tests).
"""
