# logwheel job images. Two targets:
#   job       (default) `logwheel run` and the commands that talk to an existing Kafka; the
#             wheel without Spark, no JVM
#             docker build -t logwheel .
#             docker run --rm -e LOGWHEEL_BOOTSTRAP=host:9092 logwheel run jobs.zeitgeist:pipeline
#   backfill  the job image plus logwheel[spark], Java and Spark's Kafka connector jars
#             (`logwheel backfill`, `logwheel changelog dump TOPIC --spark`)
#             docker build --target backfill -t logwheel-backfill .
# The embedded broker (framework/broker) is for development: containers use a real Kafka.
# Base images are named by tag, not yet pinned by digest: pin them (`FROM image:tag@sha256:...`,
# the digest from `docker buildx imagetools inspect image:tag`) where you build for production;
# this repository was written without registry access to look the digests up.

# BASE: any image with Python 3.11 whose `python` and `pip` are on PATH. Where no registry
# answers, ops/containers/base-image.sh makes one from Debian's packages (`make image`).
# PIP_CERT secret: a CA bundle for an index behind a TLS-inspecting proxy (`--secret
# id=pip-cert,src=/etc/ssl/certs/ca-certificates.crt`); without it pip trusts its own.
ARG BASE=python:3.11-slim

# -- wheel: logwheel built as pip builds it for an index: the images install it, not a checkout
FROM ${BASE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY framework framework
COPY changelog changelog
COPY jobs jobs
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && pip wheel --no-cache-dir --no-deps -w /dist .

# -- job: the streaming runtime, no JVM ---------------------------------------------------
FROM ${BASE} AS job
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOGWHEEL_STATE_DIR=/state \
    LOGWHEEL_LOG_FORMAT=json \
    LOGWHEEL_METRICS_PORT=9100 \
    LOGWHEEL_METRICS_ADDR=0.0.0.0
# The dependencies first, read from pyproject.toml alone: a change to logwheel's code reuses
# this layer (the slow one) and reinstalls only the wheel below.
COPY pyproject.toml /tmp/pyproject.toml
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/pyproject.toml', \
'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm /tmp/pyproject.toml /tmp/requirements.txt \
    && useradd --system --uid 10001 --home-dir /state --shell /usr/sbin/nologin logwheel \
    && mkdir -p /state && chown logwheel /state
COPY --from=wheel /dist /dist
# Installed from the wheel, not editable: the image carries no checkout (logwheel's own schemas
# are package data). The demo jobs' schemas are ./schemas of the working directory.
RUN pip install --no-deps /dist/logwheel-*.whl && pip check
WORKDIR /app
COPY schemas schemas
USER logwheel
# Task stores (RocksDB), the instance id and the state-dir lock. Each container its own:
# replicas of a computation must not share one (the lock refuses a second process).
VOLUME /state
EXPOSE 9100
# Healthy while the process serves its metrics (the first computation's port when one
# container runs several). Off when LOGWHEEL_METRICS_PORT is emptied.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD \
    python -c "import os, sys, urllib.request as u; p = os.environ.get('LOGWHEEL_METRICS_PORT'); \
sys.exit(0) if not p else u.urlopen(f'http://127.0.0.1:{p}/metrics', timeout=4)"
ENTRYPOINT ["logwheel"]
CMD ["--help"]

# -- the Spark connector's jars, from the pom an installed logwheel fetches them with ----------
FROM maven:3.9-eclipse-temurin-17 AS spark-jars
COPY framework/jvm/spark-kafka/pom.xml /src/pom.xml
RUN mvn -q -B -f /src/pom.xml org.apache.maven.plugins:maven-dependency-plugin:2.8:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory=/jars/spark-kafka

# -- backfill: Java and the connector jars for Spark ------------------------------------------
FROM job AS backfill
USER root
RUN --mount=type=secret,id=pip-cert apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && { if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi; } \
    && pip install "$(ls /dist/logwheel-*.whl)[spark]"
COPY --from=spark-jars /jars/spark-kafka /opt/logwheel/jars/spark-kafka
ENV LOGWHEEL_SPARK_JARS=/opt/logwheel/jars/spark-kafka
USER logwheel
