# Two entry points for a fresh machine (see README.md):
#   make demo   start the embedded two-DC stack and run the DR demo
#   make test   run the whole test suite
# Both build the virtual environment first, installing what is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint bench clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@command -v java >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q openjdk-17-jre-headless; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	# The Spark provider pulls in pyspark-client, which overwrites pyspark's Python
	# files with its own older copy: put the full pyspark back on top.
	$(BIN)/pip install -q --no-deps --force-reinstall $$(grep '^pyspark==' requirements.txt)
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

demo: venv
	$(BIN)/kafka-dr demo

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest tests

bench: venv
	$(BIN)/python tests/benchmarks/broker_throughput.py

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .kafka-dr airflow-home
