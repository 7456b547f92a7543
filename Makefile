# The two commands a new machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   ?= build/demo

.PHONY: setup demo kafka-demo test test-fast lint format clean bench
.DEFAULT_GOAL := setup

# Debian's chromium and chromedriver, for the dashboard's browser test
# (tests/integration/test_dashboard.py); apt needs root, or sudo.
BROWSER := /usr/bin/chromedriver
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(BROWSER):
	@echo "installing Debian's chromium and chromium-driver (the dashboard's browser test)"
	@$(SUDO) apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
	  ($(SUDO) apt-get update -q >/dev/null && \
	   $(SUDO) apt-get install -y -q chromium chromium-driver >/dev/null) || \
	  echo "could not install chromium: the dashboard's browser test will fail, the rest runs"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

demo: setup
	@rm -rf $(DEMO)
	@$(BIN)/medallion generate --landing $(DEMO)/landing --records 5000 --files 8 --seed 7
	@$(BIN)/medallion run --landing $(DEMO)/landing --lake $(DEMO)/lake
	@$(BIN)/medallion show --lake $(DEMO)/lake --layer gold

# The same pipeline fed from Kafka: a local broker (jars from Maven Central; needs java and mvn),
# generated events and customer changes produced to topics, a run, gold printed, broker stopped.
kafka-demo: setup
	$(BIN)/python tests/kafka_broker.py demo --workdir build/kafka-demo --events 5000

# One process, one shared Spark session: on 2 cores the suite is CPU-bound, and two pytest-xdist
# workers made it slower, not faster (docs/testing.md has the figures).
test: setup $(BROWSER)
	$(BIN)/python -m pytest

# The fast lane for development: unit tests and the quick in-process integration tests.
test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

# medallion against its peers (benchmarks/bench.py): results in benchmarks/results/.
# BENCH_EVENTS sets the backfill size; `make bench QUICK=1` is the smoke-test size.
BENCH_EVENTS ?= 1000000
bench: setup
	$(BIN)/python benchmarks/bench.py $(if $(QUICK),--quick,--events $(BENCH_EVENTS))

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: setup
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

# Jupyter on 127.0.0.1 with the bundle's notebooks (notebooks/): they run against local
# delta-spark with their local defaults, the lake of `make demo`. See docs/bundle.md.
.PHONY: notebook connect-env
notebook: setup
	$(BIN)/python -m pip install --quiet -e ".[test,notebook]"
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks --no-browser

# Databricks Connect in a separate virtualenv, .venv-connect: it replaces pyspark and delta-spark,
# so it never goes into .venv. Match CONNECT_VERSION to the cluster's runtime (17.3 for
# databricks.yml's spark_version); databricks-connect 16.2 and later need Python 3.12.
CONNECT_VENV    ?= .venv-connect
CONNECT_PYTHON  ?= python3.12
CONNECT_VERSION ?= 17.3.*
connect-env:
	test -x $(CONNECT_VENV)/bin/python || $(CONNECT_PYTHON) -m venv $(CONNECT_VENV)
	$(CONNECT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CONNECT_VENV)/bin/python -m pip install --quiet "databricks-connect==$(CONNECT_VERSION)" -e ".[databricks]"

clean:
	rm -rf build .pytest_cache spark-warehouse metastore_db derby.log
