"""The embedded Kafka broker: one KRaft node or a cluster, plain or secure, run as local
Java processes for development and tests.

May import: `framework.kafka`, `framework.jvm`, `framework.errors`, `framework.private_files`.
"""
