# Two entry points for a fresh machine (see README.md):
#   make demo   start the embedded two-DC stack and run the DR demo
#   make test   run the whole test suite
# Both build the virtual environment first, installing what is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint format bench bench-broker bench-replication bench-translation bench-health bench-failback bench-backfill bench-spark-cluster bench-curves bench-failover clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@command -v java >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q openjdk-17-jre-headless; }
	@# The browser test drives Debian's Chromium through its driver (no browser download at run time).
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
		{ apt-get update -q && apt-get install -y -q chromium chromium-driver; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	# The Spark provider pulls in pyspark-client, which overwrites pyspark's Python
	# files with its own older copy: put the full pyspark back on top.
	$(BIN)/pip install -q --no-deps --force-reinstall $$(grep '^pyspark==' requirements.txt)
	$(BIN)/pip install -q --no-deps -e .
	# The Spark driver's class archive (kafka_dr/spark/class_archive.py): every job's Spark context starts faster.
	$(BIN)/python -m kafka_dr.spark.class_archive
	touch $(STAMP)

demo: venv
	$(BIN)/kafka-dr demo

test: lint
	$(BIN)/python -m pytest -n 2 tests  # two halves, one per core: tests/conftest.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache  # the layers (pyproject.toml [tool.importlinter]), about 1.5 s

format: venv
	$(BIN)/ruff format .

# Benchmarks print a ratio against a baseline measured in the same run (README: Performance).
# They share the tests' support package, found through PYTHONPATH as pytest finds it through `pythonpath`.
bench: bench-broker bench-replication bench-translation bench-health bench-failback bench-backfill bench-spark-cluster bench-curves bench-failover

bench-broker: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/broker_throughput.py

bench-replication: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/replication_benchmark.py

bench-spark-cluster: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/replication_benchmark.py standalone

bench-translation: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/translation_benchmark.py

bench-health: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/health_benchmark.py
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/health_benchmark.py --moving

bench-failback: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/failback_benchmark.py

bench-backfill: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/backfill_benchmark.py

bench-curves: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/cost_curves.py

bench-failover: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/failover_benchmark.py

clean:
	rm -rf $(VENV) .kafka-dr airflow-home
