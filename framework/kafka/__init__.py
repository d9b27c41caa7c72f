"""logwheel on Kafka's clients: client configuration, topics and their policies, the
broker's limits, the collector every production goes through, a task's output and dead
letters, the record-decode rule, reading partitions to their end, consumer groups, and what
the clients' errors mean (`Unreachable`).

May import: confluent-kafka, `framework.core`, `framework.serde`, `framework.errors`.
"""
