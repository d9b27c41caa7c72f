"""A job whose hooks hang on request (tests only), each way a hook can hang.

`in` is read by its Kafka key; `count` counts each key's records and produces every count with
the record's `seq`. A value {"hang": how} hangs instead, for good:

- "sleep": in time.sleep (a network call without a timeout: a signal interrupts it);
- "mutex": in pthread_mutex_lock on a mutex it holds, through ctypes.CDLL: the GIL released,
  but no signal ends the wait (as a C library's own waits, which retry on EINTR);
- "regex": in a regular expression backtracking catastrophically (ReDoS): C code that holds the
  GIL, so no thread of the process runs;
- "timer": not in this hook, which counts as usual, but in the timer it sets, due at once.

`echo` (in `build_two` only) produces each record's seq: a second computation, for a
supervised `logwheel run` of two.
"""

from __future__ import annotations

import ctypes
import re
import time

from framework import Computation, Pipeline

HOOK_TIMEOUT_MS = 2000


def _relock(lib: ctypes.CDLL) -> None:
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
    lib.pthread_mutex_lock(mutex)
    lib.pthread_mutex_lock(mutex)  # a default mutex locked again by its owner: forever


class Hangs(Computation):
    def __init__(self, out: str) -> None:
        self.out = out

    def process_record(self, ctx, record):
        hang = record.value.get("hang")
        if hang == "sleep":
            time.sleep(10**6)
        elif hang == "mutex":
            _relock(ctypes.CDLL(None))
        elif hang == "regex":
            re.match(r"(a+)+$", "a" * 64 + "b")
        n = ctx.state.get("n", 0) + 1
        ctx.state["n"] = n
        ctx.produce(self.out, {"key": ctx.key, "n": n, "seq": record.value["seq"]})
        if hang == "timer":
            ctx.set_timer("stuck", ctx.processing_time, "processing")

    def process_timer(self, ctx, timer):
        time.sleep(10**6)


class Echo(Computation):
    def __init__(self, out: str) -> None:
        self.out = out

    def process_record(self, ctx, record):
        ctx.produce(self.out, {"seq": record.value["seq"]})


def build(name: str, prefix: str) -> Pipeline:
    pipeline = Pipeline(name, partitions=2)
    pipeline.source(f"{prefix}in")
    pipeline.computation(
        "count",
        lambda: Hangs(f"{prefix}out"),
        inputs={f"{prefix}in": None},
        outputs={f"{prefix}out": None},
        hook_timeout_ms=HOOK_TIMEOUT_MS,
    )
    return pipeline


def build_two(name: str, prefix: str) -> Pipeline:
    pipeline = build(name, prefix)
    pipeline.computation(
        "echo",
        lambda: Echo(f"{prefix}echoed"),
        inputs={f"{prefix}in": None},
        outputs={f"{prefix}echoed": None},
    )
    return pipeline
