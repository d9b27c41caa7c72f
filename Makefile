# logwheel: `make demo` and `make test` do everything on a fresh machine (see README.md).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
KAFKA_JARS := ops/jars/kafka
SPARK_JARS := ops/jars/spark-kafka
REGISTRY_JARS := ops/jars/registry
PYTEST_ARGS ?=
# Tests mostly wait on brokers and processes: five test files run side by side (pytest-xdist),
# each test with its own topics, groups and state; PYTEST_WORKERS=0 runs them one at a time.
# Three workers kept 2 cores about half busy (CPU time = wall time): four took 10.6 min of
# pytest against 13.2 with three (2026-11-27, one run each; the second also with two SIGKILLs
# fewer in test_wordcount_sigkill, about 35 s of one worker), every liveness bound met. With
# joins, sinks, queries, replay, the dashboard, containers and rescale added, four workers
# took 790 s of pytest with 1.2 of the 2 cores busy (CPU 16.5 min in 14 min): hence five.
PYTEST_WORKERS ?= 5

.DEFAULT_GOAL := help
.PHONY: help venv jars postgres browser image test demo enrich-demo chaos soak bench lint broker broker-stop

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
	@echo "make postgres     Debian's PostgreSQL server binaries, for the sink's tests and bench"
	@echo "make browser      Debian's chromium, for the dashboard's browser test (apt-get, as root)"
	@echo "make broker       start the embedded broker;  make broker-stop  stops it"
	@echo "make image        podman, the local Debian base image (once) and the job image logwheel:latest"

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
# The Schema Registry (Apicurio) is one jar Maven builds: up to 2 minutes when ~/.m2 is empty,
# 20-30 s when full. A build is kept in the user's cache under the hash of what it is built
# from, and a checkout of the same sources (a fresh clone) links it instead of building again.
REGISTRY_SOURCES := framework/jvm/registry/pom.xml framework/jvm/settings.xml \
	$(sort $(wildcard framework/jvm/registry/src/main/java/dev/logwheel/registry/*.java))
REGISTRY_BUILT = $(or $(LOGWHEEL_HOME),$(HOME)/.cache/logwheel)/built/registry-$(shell \
	cat $(REGISTRY_SOURCES) | sha256sum | cut -c1-16)
$(REGISTRY_JARS)/.stamp: $(REGISTRY_SOURCES) $(VENV)/.stamp
	rm -rf $(REGISTRY_JARS)
	@if ls $(REGISTRY_BUILT)/*-runner.jar >/dev/null 2>&1; then \
	  mkdir -p $(REGISTRY_JARS) && { cp -l $(REGISTRY_BUILT)/*-runner.jar $(REGISTRY_JARS)/ 2>/dev/null \
	    || cp $(REGISTRY_BUILT)/*-runner.jar $(REGISTRY_JARS)/; } \
	  && echo "registry: the jar built from these sources, from $(REGISTRY_BUILT)"; \
	else \
	  $(PY) -m framework.cli jars registry --into $(REGISTRY_JARS) || exit 1; \
	  keep=$(REGISTRY_BUILT).$$$$; mkdir -p $$keep \
	    && { cp -l $(REGISTRY_JARS)/*-runner.jar $$keep/ 2>/dev/null || cp $(REGISTRY_JARS)/*-runner.jar $$keep/; } \
	    && mv -T $$keep $(REGISTRY_BUILT) 2>/dev/null || rm -rf $$keep; \
	fi
	touch $@

# The sink's tests and bench run Debian's PostgreSQL server (tests/support_postgres.py starts one
# as the postgres user on a free port): installed here where its binaries are missing, without
# the package's own cluster (the tests make theirs; the createcluster.conf written first is
# kept over the package's). apt-get needs root, as CI runs.
PG_INITDB := $(wildcard /usr/lib/postgresql/*/bin/initdb)
postgres:
ifeq ($(PG_INITDB),)
	mkdir -p /etc/postgresql-common
	echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql
endif

# The dashboard's test drives Debian's chromium through Playwright (whose own browser download
# is not reachable here): installed when missing, as root; otherwise that test is skipped, saying so.
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium) \
	      || echo "make browser: could not install chromium; the dashboard's browser test is skipped" >&2; \
	  else \
	    echo "make browser: no chromium: run 'apt-get install -y chromium' as root, else the dashboard's browser test is skipped" >&2; \
	  fi; }

# The checkout is byte-compiled first: where PYTHONDONTWRITEBYTECODE is set (as on this machine)
# no process writes a .pyc, and each of the suite's many `logwheel run` processes compiled what
# it imports again, 0.15 s of CPU each; compileall writes them whatever that variable says.
test: venv jars lint browser postgres
	@ops/containers/base-image.sh --exists >/dev/null 2>&1 || $(MAKE) image \
		|| echo "make test: no container image (see above): the container tests say why they skip"
	$(PY) -m framework.cli schemas check
	$(PY) -m compileall -q -j 0 framework jobs changelog bench tests >/dev/null
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
	tests/integration/test_job_containers.py tests/integration/test_containers.py \
	tests/integration/test_rescale.py
chaos: venv jars postgres
	LOGWHEEL_CHAOS_FULL=1 LOGWHEEL_TEST_JAR_BUILD=1 \
		$(PY) -m pytest -q -ra --durations=10 $(PYTEST_ARGS) $(CHAOS_TESTS)

soak: venv jars
	$(PY) -m tests.chaos.seeded.soak

bench: venv jars postgres
	LOGWHEEL_BENCH_PEERS=$${LOGWHEEL_BENCH_PEERS-1} $(PY) bench/run_all.py

# Jobs as containers with podman (README "Containers"): podman, runc and debootstrap from
# Debian when missing, the Debian base image made with debootstrap (once per machine, about a
# minute; ops/containers/base-image.sh) and the job image built on it from the Dockerfile.
image:
	@command -v podman >/dev/null && command -v runc >/dev/null && command -v debootstrap >/dev/null \
		|| { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq podman runc debootstrap; } \
		|| { echo "make image: install podman, runc and debootstrap (as root: apt-get install podman runc debootstrap)" >&2; exit 1; }
	ops/containers/build-image.sh localhost/logwheel:latest

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

broker: venv jars
	$(PY) -m framework.cli broker start

broker-stop: venv
	$(PY) -m framework.cli broker stop
