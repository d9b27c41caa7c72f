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

# -- wheel: logwheel built as pip builds it for an index: the images install it, not a checkout
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY framework framework
COPY changelog changelog
COPY jobs jobs
RUN pip wheel --no-cache-dir --no-deps -w /dist .

# -- the Spark connector's jars, from the pom an installed logwheel fetches them with ----------
FROM maven:3.9-eclipse-temurin-17 AS spark-jars
COPY framework/jvm/spark-kafka/pom.xml /src/pom.xml
RUN mvn -q -B -f /src/pom.xml org.apache.maven.plugins:maven-dependency-plugin:2.8:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory=/jars/spark-kafka

# -- job: the streaming runtime, no JVM ---------------------------------------------------
FROM python:3.11-slim AS job
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOGWHEEL_STATE_DIR=/state \
    LOGWHEEL_LOG_FORMAT=json \
    LOGWHEEL_METRICS_PORT=9100 \
    LOGWHEEL_METRICS_ADDR=0.0.0.0
COPY --from=wheel /dist /dist
# Installed from the wheel, not editable: the image carries no checkout (logwheel's own schemas
# are package data). The demo jobs' schemas are ./schemas of the working directory.
RUN pip install /dist/logwheel-*.whl \
    && useradd --system --uid 10001 --home-dir /state --shell /usr/sbin/nologin logwheel \
    && mkdir -p /state && chown logwheel /state
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

# -- backfill: Java and the connector jars for Spark ------------------------------------------
FROM job AS backfill
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && pip install "$(ls /dist/logwheel-*.whl)[spark]"
COPY --from=spark-jars /jars/spark-kafka /opt/logwheel/jars/spark-kafka
ENV LOGWHEEL_SPARK_JARS=/opt/logwheel/jars/spark-kafka
USER logwheel
