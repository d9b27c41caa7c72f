"""A stand-in sink for tests that declare a sink and never run it (its declaration, topics,
ACLs, graph, dashboard card, dead letters)."""

from __future__ import annotations


class IdleSink:
    """Has the `framework.sinks.Sink` shape; nothing is ever written."""

    def open(self, topic, partition):
        return None

    def write(self, topic, partition, records, next_offset):
        pass

    def close(self):
        pass
