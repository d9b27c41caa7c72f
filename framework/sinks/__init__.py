"""Sinks: writing a pipeline's streams into outside systems exactly once (README, "Sinks:
exactly-once into a database"). `Sink` is the protocol (framework/sinks/protocol.py says
what the runtime does with each answer); `PostgresSink` writes PostgreSQL tables."""

from framework.sinks.postgres import PostgresSink
from framework.sinks.protocol import DEFAULT_BATCH, Fenced, Refused, Sink, SinkError, Unavailable

__all__ = [
    "DEFAULT_BATCH",
    "Fenced",
    "PostgresSink",
    "Refused",
    "Sink",
    "SinkError",
    "Unavailable",
]
