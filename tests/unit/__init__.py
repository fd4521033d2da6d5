"""Unit tests: pure logic on small fakes (tests/support/fakes.py), no broker, no Spark, no Airflow run.

Where a test lives: tests/unit mirrors include/kafka_dr/, as Airflow's provider tests mirror their source tree.
The tests of include/kafka_dr/<package>/<module>.py are tests/unit/<package>/test_<module>.py (those of a top-level
module, tests/unit/test_<module>.py), one file per module; each folder is a package, so equal file names in two
folders do not clash. A check of a file that is no module is named after it (test_compose.py: docker-compose.yaml).
Helpers two test files need live in tests/support/, not in a test file.
"""
