# A container for `logwheel run` (and the other commands that talk to an existing Kafka):
#   docker build -t logwheel . && docker run --rm -e LOGWHEEL_BOOTSTRAP=host:9092 \
#     logwheel run jobs.zeitgeist:pipeline
# No Java here: the embedded broker is for development; containers use a real cluster.
FROM python:3.11-slim

WORKDIR /app
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    LOGWHEEL_STATE_DIR=/state
COPY pyproject.toml README.md ./
COPY framework framework
COPY changelog changelog
COPY jobs jobs
COPY schemas schemas
# Editable, so schemas/ stays beside the packages where framework.serde looks for it.
RUN pip install -e . && mkdir -p /state
VOLUME /state

ENTRYPOINT ["logwheel"]
CMD ["--help"]
