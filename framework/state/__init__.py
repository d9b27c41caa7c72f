"""Durable local state: the RocksDB store of a task with its checkpoint in the same batch,
restoring stores (and keeping standby replicas) from the changelog and timer journal, and the
table replicas a computation joins against.

May import: rocksdict, `framework.kafka`, `framework.core`, `framework.serde`, `framework.errors`.
"""
