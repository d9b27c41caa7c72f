"""`logwheel backfill`: the pure plan, how a plan is made and stored, the Spark session and
Kafka source, the frames a backfill reads, the Spark task (the core's `Executor` again) and
the hand-over to `run`.

May import: pyspark (the `[spark]` extra, imported inside functions), `framework.state`,
`framework.kafka`, `framework.core`, `framework.serde`; never `framework.streaming`.
"""
