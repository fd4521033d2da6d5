# Two entry points for a fresh machine (see README.md):
#   make demo   start the embedded two-DC stack and run the DR demo
#   make test   run the whole test suite
# Both build the virtual environment first, installing what is missing.

# The project's Python (.python-version; the compose image's base is the same, tests/unit/test_compose.py checks it).
PYTHON ?= python$(shell cat .python-version)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := -r requirements.txt pip setuptools -c constraints.txt
PYSPARK := $$(grep '^pyspark==' requirements.txt)

# uv installs the venv: several times faster than pip here (docs/development.md: "The venv"). It is
# itself installed into the venv by the venv's pip, pinned like everything else by constraints.txt. uv reads no pip
# configuration, so it is handed pip's index settings (a machine's mirror, extra indexes, wheel folders) and, like
# pip, takes the best version across all of them: both install from the same place. uv compiles what it installs to
# bytecode (pip does, uv does not by default): where PYTHONDONTWRITEBYTECODE is set, as on these machines, Python never
# caches it either, and each `airflow` command compiled Airflow afresh (7.7 s of CPU to start instead of 3.5 s).
pip_setting = $(strip $(or $($(1)),$(shell $(PYTHON) -m pip config get global.$(2) 2>/dev/null)))
uv_setting = $(if $(2),$(1)='$(2)')
comma := ,
# Worked out once, when first used (asking pip takes a moment).
UV_ENV = $(eval UV_ENV := UV_PYTHON=$(BIN)/python UV_INDEX_STRATEGY=unsafe-best-match UV_COMPILE_BYTECODE=1 \
	$(call uv_setting,UV_INDEX_URL,$(call pip_setting,PIP_INDEX_URL,index-url)) \
	$(call uv_setting,UV_EXTRA_INDEX_URL,$(call pip_setting,PIP_EXTRA_INDEX_URL,extra-index-url)) \
	$(call uv_setting,UV_FIND_LINKS,$(subst $() ,$(comma),$(call pip_setting,PIP_FIND_LINKS,find-links))))$(UV_ENV)
UV = $(UV_ENV) $(BIN)/uv pip

.PHONY: venv constraints demo test check durations lint format docs bench bench-broker bench-peers bench-replication bench-translation bench-health bench-failback bench-backfill bench-spark-cluster bench-curves bench-failover bench-aged bench-metrics bench-outage sabotage clean

KAFKA_JARS := $(VENV)/.kafka-jars
venv: $(STAMP) $(KAFKA_JARS)

# Apache Kafka's broker and MirrorMaker 2 as jars from Maven Central (include/kafka/pom.xml), for the local stack, the
# tests and the benchmarks: Maven's cache (~/.m2) makes a second fetch download nothing. A failed fetch is one line.
# Then a class archive of a node's classes beside the jars (every Kafka JVM here starts on a third less CPU).
$(KAFKA_JARS): include/kafka/pom.xml $(STAMP)
	@command -v mvn >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q maven; }
	$(BIN)/python -m kafka_dr_dev.local.apache fetch
	touch $(KAFKA_JARS)

# requirements.txt says what the project asks for; constraints.txt pins every package of a working venv, so an
# install resolves nothing afresh (Airflow's way).
$(STAMP): requirements.txt constraints.txt pyproject.toml dev/pyproject.toml
	@command -v java >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q openjdk-17-jre-headless; }
	@# The browser test drives Debian's Chromium through its driver (no browser download at run time).
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
		{ apt-get update -q && apt-get install -y -q chromium chromium-driver; }
	@# The broker of `kafka-dr-dev airflow up --executor celery` (and of its test).
	@command -v redis-server >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q redis-server; }
	@# Prometheus and promtool: the alerting rules' unit tests and the scrape test (tests start their own server).
	@command -v promtool >/dev/null 2>&1 || \
		{ apt-get update -q && apt-get install -y -q --no-install-recommends prometheus; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt uv
	@# From uv's cache alone first: an index that answers without HTTP cache headers (this machine's does) makes
	@# uv online fetch pyspark's source archive again and rebuild it at every install. Online when anything is missing.
	$(UV) install -q --offline $(PACKAGES) 2>/dev/null || $(UV) install -q $(PACKAGES)
	# The Spark provider pulls in pyspark-client, which overwrites pyspark's Python
	# files with its own older copy: put the full pyspark back on top (just cached by uv).
	$(UV) uninstall -q pyspark
	$(UV) install -q --offline --no-deps $(PYSPARK)
	@# The product and, apart from it, the development stack (dev/: the local stack, Airflow for it, the demo).
	$(UV) install -q --no-deps -e . -e dev
	# The Spark driver's class archive (kafka_dr/spark/class_archive.py): every job's Spark context starts faster.
	$(BIN)/python -m kafka_dr.spark.class_archive
	touch $(STAMP)

# constraints.txt from the venv as it is now, the editable kafka-dr left out. To change a pin: edit requirements.txt,
# install it without constraints (`.venv/bin/uv pip install -r requirements.txt`, then the pyspark lines of the venv
# recipe), run the tests, then `make constraints`.
constraints:
	@test -x $(BIN)/pip || { echo "no $(VENV)/bin/pip: run make venv first" >&2; exit 2; }
	{ echo "# Every package of a working venv, pinned: make venv installs requirements.txt with -c constraints.txt,"; \
	  echo "# so an install resolves nothing afresh. Written by make constraints (pip freeze --all --exclude-editable"; \
	  echo "# of .venv); not edited by hand."; \
	  $(BIN)/pip freeze --all --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The project's own Python files compiled once for every process to load (not cached at run time either).
MERMAID_VERSION := 11.12.0
MERMAID := docs/assets/javascripts/mermaid.min.js
BYTECODE := $(BIN)/python -m compileall -q include spark_jobs dags plugins tests

demo: venv $(MERMAID)
	$(BYTECODE)
	@# The documentation site, which the DR page serves at /kafka-dr/docs/ (each DAG's doc_md links its runbook there).
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build -q
	$(BIN)/kafka-dr-dev demo

test: lint $(MERMAID)
	$(BYTECODE)
	@# A file at a time to whichever worker is free, longest first (tests/conftest.py); the 25 slowest tests listed.
	$(BIN)/python -m pytest -n 4 --dist loadfile --durations=25 tests

# The development loop's tier: the linters and the tests that start no broker, registry, Spark JVM nor Airflow (the
# ones not marked integration; tests/conftest.py checks the markers). make test stays everything.
check: lint
	$(BIN)/python -m pytest -n 2 -m "not integration" tests

# tests/durations.json anew from a whole run of make test: the seconds per test file by which it orders its files.
durations: export KDR_WRITE_DURATIONS := tests/durations.json
durations: test

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache  # the layers (pyproject.toml [tool.importlinter]), about 1.5 s

format: venv
	$(BIN)/ruff format .

# The documentation site from docs/ into site/ (mkdocs.yml); --strict: a broken link or anchor fails it, as it fails
# tests/docs in make test. Serve it with Airflow at /kafka-dr/docs/, or alone with `.venv/bin/mkdocs serve`.
docs: venv $(MERMAID)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Mermaid for the architecture page's diagrams, served with the site so that they render offline (mkdocs-material
# otherwise loads it from unpkg.com): from npm, as the Kafka jars come from Maven. A failed fetch is one line.
$(MERMAID):
	@command -v npm >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q npm; }
	@mkdir -p $(dir $@) build/mermaid
	@cd build/mermaid && npm pack -q mermaid@$(MERMAID_VERSION) >/dev/null 2>&1 \
		|| { echo "mermaid $(MERMAID_VERSION) could not be fetched from npm" >&2; exit 1; }
	@tar -xzf build/mermaid/mermaid-$(MERMAID_VERSION).tgz -C build/mermaid package/dist/mermaid.min.js
	@mv build/mermaid/package/dist/mermaid.min.js $@

# Benchmarks print a ratio against a baseline measured in the same run (docs/benchmarks.md).
# They share the tests' support package, found through PYTHONPATH as pytest finds it through `pythonpath`.
bench: bench-broker bench-replication bench-translation bench-health bench-failback bench-backfill bench-spark-cluster bench-curves bench-failover bench-aged bench-metrics bench-peers

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

# Issue 47: the outage scenario of the replication tests, 20 runs in a row (about 1.5 minutes each).
bench-outage: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/outage_repeat.py

bench-failover: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/failover_benchmark.py

bench-aged: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/aged_state_benchmark.py

bench-metrics: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/metrics_benchmark.py

# kafka-dr against MirrorMaker 2 (its defaults, and tuned) on the same Apache Kafka brokers, in the same run.
bench-peers: venv
	PYTHONPATH=tests $(BIN)/python tests/benchmarks/peers_benchmark.py

# One deliberate break per invariant, in a scratch copy, and the test named for it must fail (docs/development.md).
# Outside `make test`: about 3 minutes (three pytest runs at a time).
sabotage: venv
	$(BIN)/python tests/sabotage.py

clean:
	rm -rf $(VENV) .kafka-dr-dev airflow-home
