"""Clicks from a retrying producer, for the dedup tests: sent with their id in the
`logwheel.id` header, and the per-key outputs of a click counter (`{"click", "n"}`) read back
and predicted."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable

from confluent_kafka import Producer


def send_clicks(kafka: str, topic: str, clicks: Iterable[tuple[str, str, int]]) -> None:
    """Produce (user, click id, timestamp) records: key user, value {"user", "click"}."""
    producer = Producer({"bootstrap.servers": kafka, "enable.idempotence": True})
    for user, click, ts in clicks:
        value = json.dumps({"user": user, "click": click}).encode()
        producer.produce(topic, value, user.encode(), timestamp=ts,
                         headers=[("logwheel.id", click.encode())])  # fmt: skip
        producer.poll(0)
    assert producer.flush(60) == 0


def per_key(msgs) -> dict[str, list[tuple[str, int]]]:
    """A counter's outputs per key: (click, n) in order."""
    out = collections.defaultdict(list)
    for m in msgs:
        v = json.loads(m.value())
        out[m.key().decode()].append((v["click"], v["n"]))
    return dict(out)


def counted(clicks: Iterable[tuple[str, str]], dedup: bool) -> dict[str, list[tuple[str, int]]]:
    """What `per_key` should read for (user, click id) sent in this order: every click, or
    (with `dedup`) each click id once per user."""
    out, seen = collections.defaultdict(list), set()
    for user, click in clicks:
        if dedup and (user, click) in seen:
            continue
        seen.add((user, click))
        out[user].append((click, len(out[user]) + 1))
    return dict(out)
