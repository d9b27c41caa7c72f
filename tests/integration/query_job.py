"""The job tests/integration/test_query.py queries: per user, the clicks (an input read by its
Kafka key) and page views (re-keyed by their `user` field) counted, exactly once. A record
with `"block": PATH` makes its hook write its count, say so in PATH + ".entered", and wait for
PATH to exist before it returns: its write is then made but not committed."""

from __future__ import annotations

import time
from pathlib import Path

from framework import Computation, Pipeline, key_by

BLOCK_S = 60.0


class PerUser(Computation):
    def process_record(self, ctx, record):
        kind = "views" if record.stream.endswith("views") else "clicks"
        ctx.state[kind] = ctx.state.get(kind, 0) + 1
        flag = record.value.get("block") if isinstance(record.value, dict) else None
        if flag:
            Path(flag + ".entered").touch()
            deadline = time.monotonic() + BLOCK_S
            while not Path(flag).exists() and time.monotonic() < deadline:
                time.sleep(0.02)


def build(name: str, prefix: str) -> Pipeline:
    pipeline = Pipeline(name)
    pipeline.source(f"{prefix}clicks")
    pipeline.source(f"{prefix}views")
    pipeline.computation(
        "per-user",
        PerUser,
        inputs={f"{prefix}clicks": None, f"{prefix}views": key_by("user")},
        guarantee="exactly_once",
        hook_timeout_ms=90_000,
    )
    return pipeline
