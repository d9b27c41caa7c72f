"""The programming model and its executor: `Record`, `Timer`, `Computation`, the keyed
context, the keyed state cache, the timer service, watermark arithmetic, the pipeline
declaration, windows and aggregations (computations built on those), the `Executor` that the
Harness, the Kafka tasks and the Spark tasks all drive, dead-letter policy and the metrics
those count.

May import: the standard library, `framework.errors`, `framework.serde`, prometheus-client.
Never a Kafka client, RocksDB or Spark (pyproject's import-linter contracts check it).
"""
