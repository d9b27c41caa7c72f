"""The re-keying rule: where a record of an input with a key extractor goes, the same for the
streaming side's re-keying task (which writes it to the computation's `.by-key` topic) and the
backfill (which groups it by that key on Spark), so both dead-letter the same records at the
same stage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework.core.api import Record
from framework.core.declarations import Input
from framework.errors import BadRecord, Retry
from framework.kafka.collector import ID_HEADER, Outgoing
from framework.kafka.limits import TopicLimits
from framework.kafka.record_decoding import Headers, decode_record


def routed_key(
    inp: Input, decode: Callable[[bytes], Any], key: bytes | None, value: bytes | None,
    timestamp: int, headers: Headers, id_prefix: str, offset: int,
) -> tuple[Record, bytes]:  # fmt: skip
    """The record as read (`kafka.record_decoding.decode_record`) and the key the input's
    extractor makes of it, encoded: `BadRecord` at stage "decode" (the key, value or id header
    cannot be read) or "key" (the extractor fails, or gives what is no str Kafka can carry);
    a `Retry` passes through."""
    record = decode_record(decode, inp.stream, key, value, timestamp, headers, id_prefix, offset)
    try:
        return record, inp.route(record).encode()
    except Retry:
        raise
    except Exception as error:
        raise BadRecord("key", str(error), error) from error


def rekey(
    inp: Input, target: str, limits: TopicLimits, decode: Callable[[bytes], Any],
    key: bytes | None, value: bytes | None, timestamp: int, headers: Headers,
    id_prefix: str, offset: int,
) -> Outgoing:  # fmt: skip
    """The record for `target`, the `.by-key` topic of `inp`: its value and timestamp as read,
    keyed by `routed_key`, with its id in the `logwheel.id` header; `BadRecord` as there, or
    at stage "produce" where the target's `limits` say the broker would refuse it."""
    record, routed = routed_key(inp, decode, key, value, timestamp, headers, id_prefix, offset)
    limits.check(target, routed, value, timestamp)
    return target, routed, value, -1, timestamp, [(ID_HEADER, record.id.encode())]
