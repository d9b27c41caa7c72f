"""Operating a pipeline: `reset` (reprocessing history), `status` and `graph`, the ACLs a
job needs, and dead letters listed and replayed (`dlq`).

May import: anything but `framework.cli`.
"""
