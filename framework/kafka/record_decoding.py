"""A Kafka record as a computation sees it: the one decoding rule that the streaming tasks
and the backfill's Spark tasks share, so that both hand a hook the same `Record`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from framework.core.api import Record, make_record
from framework.core.metrics import DROPPED_HEADERS
from framework.errors import BadRecord, Retry
from framework.kafka.collector import ID_HEADER, RESERVED_PREFIX

Headers = Iterable[tuple[str, bytes | bytearray | None]] | None


def decode_record(
    decode: Callable[[bytes], Any],
    stream: str,
    key: bytes | None,
    value: bytes | None,
    timestamp: int,
    headers: Headers,
    id_prefix: str,
    offset: int,
) -> Record:
    """The record of `stream` a Kafka record carries: its key (UTF-8, "" when absent), its
        value decoded, its id (the `logwheel.id` header, else `id_prefix` + offset, the prefix being
    "topic/partition/"; other headers in logwheel's namespace are dropped, counted);
        BadRecord at stage "decode" when any of them cannot be read (a `Retry`, such as a
    schema registry that does not answer, passes through: the record is not bad)."""
    try:
        decoded = decode(value)
        rid = None
        if headers:
            dropped = 0
            for name, header in headers:
                if name == ID_HEADER:
                    rid = header.decode()
                elif name.startswith(RESERVED_PREFIX):  # only logwheel writes these: dropped
                    dropped += 1
            if dropped:  # one increment per record: a record may carry 80,000 of them
                DROPPED_HEADERS.labels(stream).inc(dropped)
        key_text = key.decode() if key else ""
        rid = rid or f"{id_prefix}{offset}"
        return make_record(key_text, decoded, timestamp, stream, rid)
    except Retry:  # e.g. the schema registry away: not the record's fault, read it again later
        raise
    except Exception as error:
        raise BadRecord("decode", str(error), error) from error
