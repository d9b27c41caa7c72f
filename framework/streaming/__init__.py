"""The `logwheel run` process: the runner's loop, one membership of the consumer group,
the task manager and tasks, the committer's numbered steps, watermark channels, injectors,
the meter, and launching one process per computation.

May import: `framework.state`, `framework.kafka`, `framework.core`, `framework.serde`.
"""
