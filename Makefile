# logwheel: `make demo` and `make test` do everything on a fresh machine (see README.md).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
KAFKA_JARS := ops/jars/kafka
SPARK_JARS := ops/jars/spark-kafka
REGISTRY_JARS := ops/jars/registry
PYTEST_ARGS ?=
# Tests mostly wait on brokers and processes: four test files run side by side (pytest-xdist),
# each test with its own topics, groups and state; PYTEST_WORKERS=0 runs them one at a time.
# Three workers kept 2 cores about half busy (CPU time = wall time): four took 10.6 min of
# pytest against 13.2 with three (2026-11-27, one run each; the second also with two SIGKILLs
# fewer in test_wordcount_sigkill, about 35 s of one worker), every liveness bound met.
PYTEST_WORKERS ?= 4

.DEFAULT_GOAL := help
.PHONY: help venv jars test demo enrich-demo chaos soak bench lint broker broker-stop

help:
	@echo "make demo         Zeitgeist on the embedded broker: planted spike and dip found, nothing else"
	@echo "make test         every test suite (unit, integration on a real broker, chaos reduced)"
	@echo "make enrich-demo  the stream-table join (jobs/enrich) on the embedded broker"
	@echo "make chaos        the chaos suite at full size (LOGWHEEL_CHAOS_FULL=1), the jar build"
	@echo "make soak         the windowed pipeline under faults for LOGWHEEL_SOAK_MINUTES (30)"
	@echo "make bench        the benchmarks"
	@echo "make lint         ruff check, ruff format --check, the layering contracts (lint-imports)"
	@echo "make venv         .venv with logwheel installed editable, with its test extras"
	@echo "make jars         the Kafka broker's, Spark's Kafka connector's and the Schema Registry's jars"
	@echo "make broker       start the embedded broker;  make broker-stop  stops it"

venv: $(VENV)/.stamp
$(VENV)/.stamp: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "make venv: no $(PYTHON) on PATH: install Python 3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $@

jars: $(KAFKA_JARS)/.stamp $(SPARK_JARS)/.stamp $(REGISTRY_JARS)/.stamp
# framework/jvm/jars.py fetches them as an installed logwheel does (into its jar cache).
$(KAFKA_JARS)/.stamp: framework/jvm/kafka/pom.xml $(VENV)/.stamp
	rm -rf $(KAFKA_JARS)
	$(PY) -m framework.cli jars kafka --into $(KAFKA_JARS)
	touch $@
# Spark's connector must match the installed pyspark, hence the venv first.
$(SPARK_JARS)/.stamp: framework/jvm/spark-kafka/pom.xml $(VENV)/.stamp
	rm -rf $(SPARK_JARS)
	$(PY) -m framework.cli jars spark --into $(SPARK_JARS)
	touch $@
# The Schema Registry (Apicurio) is one jar Maven builds: up to 2 minutes when ~/.m2 is empty.
$(REGISTRY_JARS)/.stamp: framework/jvm/registry/pom.xml $(wildcard framework/jvm/registry/src/main/java/dev/logwheel/registry/*.java) $(VENV)/.stamp
	rm -rf $(REGISTRY_JARS)
	$(PY) -m framework.cli jars registry --into $(REGISTRY_JARS)
	touch $@

test: venv jars lint
	$(PY) -m framework.cli schemas check
	$(PY) -m pytest -q -ra --durations=10 -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) tests

demo: venv jars
	$(PY) -m framework.cli broker start
	LOGWHEEL_BOOTSTRAP= $(PY) -m jobs.zeitgeist.demo  # the embedded broker only: a demo wipes its topics

enrich-demo: venv jars
	$(PY) -m framework.cli broker start
	LOGWHEEL_BOOTSTRAP= $(PY) -m jobs.enrich.demo

# The chaos suite at full size, ten fresh brokers in a row, the clean shutdown under load,
# the fresh-cache jar build (a 136 MB build) and the full rescale (4 -> 8 -> 3, a SIGKILL):
# every figure with an aim printed beside it.
CHAOS_TESTS := tests/chaos tests/integration/test_broker_ready.py \
	tests/integration/test_shutdown.py tests/integration/test_jars.py \
	tests/integration/test_rescale.py
chaos: venv jars
	LOGWHEEL_CHAOS_FULL=1 LOGWHEEL_TEST_JAR_BUILD=1 \
		$(PY) -m pytest -q -ra --durations=10 $(PYTEST_ARGS) $(CHAOS_TESTS)

soak: venv jars
	$(PY) -m tests.chaos.seeded.soak

bench: venv jars
	LOGWHEEL_BENCH_PEERS=$${LOGWHEEL_BENCH_PEERS-1} $(PY) bench/run_all.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

broker: venv jars
	$(PY) -m framework.cli broker start

broker-stop: venv
	$(PY) -m framework.cli broker stop
