"""The `logwheel run` process: the runner of one part, the wiring of its memberships for the
part's runtime, one membership and its loop, the task managers and tasks (a computation's
keyed tasks, a sink's), the committers (a Kafka transaction's numbered steps, a sink's writes),
watermark channels, holds, injectors, the meter, and one process per part under a supervisor.

May import: `framework.state`, `framework.kafka`, `framework.core`, `framework.serde`.
"""
