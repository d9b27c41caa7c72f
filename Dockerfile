# logwheel job images. Two targets:
#   job       (default) `logwheel run` and the commands that talk to an existing Kafka; no JVM
#             docker build -t logwheel .
#             docker run --rm -e LOGWHEEL_BOOTSTRAP=host:9092 logwheel run jobs.zeitgeist:pipeline
#   backfill  the job image plus Java and Spark's Kafka connector jars, for Spark backfills
#             (`logwheel changelog dump TOPIC --spark`, framework.spark)
#             docker build --target backfill -t logwheel-backfill .
# The embedded broker (framework/broker.py) is for development: containers use a real Kafka.

# -- the Spark connector's jars, fetched by Maven as `make jars` does ------------------------
FROM maven:3.9-eclipse-temurin-17 AS spark-jars
WORKDIR /src
COPY ops/fetch_jars.sh ops/fetch_jars.sh
COPY ops/maven/spark-kafka ops/maven/spark-kafka
# MVN_SETTINGS: Maven's defaults (ops/maven/settings.xml is for the development machine).
RUN MVN_SETTINGS=/none ops/fetch_jars.sh ops/maven/spark-kafka /jars/spark-kafka

# -- job: the streaming runtime, no JVM ---------------------------------------------------
FROM python:3.11-slim AS job
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOGWHEEL_STATE_DIR=/state \
    LOGWHEEL_LOG_FORMAT=json \
    LOGWHEEL_METRICS_PORT=9100
WORKDIR /app
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir -p framework changelog jobs && pip install . && pip uninstall -y logwheel
COPY framework framework
COPY changelog changelog
COPY jobs jobs
COPY schemas schemas
# Editable, so schemas/ stays beside the packages where framework.serde looks for it.
RUN pip install --no-deps -e . \
    && useradd --system --uid 10001 --home-dir /state --shell /usr/sbin/nologin logwheel \
    && mkdir -p /state && chown logwheel /state
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

# -- backfill: Java and the connector jars for Spark ------------------------------------------
FROM job AS backfill
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=spark-jars /jars/spark-kafka /opt/logwheel/jars/spark-kafka
ENV LOGWHEEL_SPARK_JARS=/opt/logwheel/jars/spark-kafka
USER logwheel
