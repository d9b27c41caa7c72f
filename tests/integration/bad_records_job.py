"""A job that turns its input into every kind of bad output on request (tests only).

`in` is read by its Kafka key; each value says what the hook does: {"ok": i} counts and
echoes, {"emit": "future"} produces two hours ahead, {"emit": "big", "size": n} produces n
incompressible bytes, {"state": "set"} keeps a set in its state, {"emit": "half"} produces a
good record and then one its Avro schema rejects. `keyed` is re-keyed by its field "k" (an
extractor that returns None when the field is absent).
"""

from __future__ import annotations

import base64
import os
import time

from framework import Computation, Pipeline


class Echo(Computation):
    def __init__(self, out: str, avro_out: str) -> None:
        self.out, self.avro_out = out, avro_out

    def process_record(self, ctx, record):
        v = record.value
        if "ok" in v:
            ctx.state["n"] = ctx.state.get("n", 0) + 1
            ctx.produce(self.out, {"ok": v["ok"], "n": ctx.state["n"]})
        elif v.get("emit") == "future":
            ctx.produce(self.out, {"future": True}, timestamp=time.time_ns() // 10**6 + 7_200_000)
        elif v.get("emit") == "big":
            blob = base64.b64encode(os.urandom(v["size"])).decode()
            ctx.produce(self.out, {"big": blob})
        elif v.get("state") == "set":
            ctx.state["n"] = 10**6
            ctx.state["s"] = {1, 2}
        elif v.get("emit") == "half":
            ctx.state["n"] = 10**6
            ctx.produce(self.out, {"half": "first"})
            ctx.produce(self.avro_out, {"word": 1, "count": "not a number"})


class Rekeyed(Computation):
    def __init__(self, out: str) -> None:
        self.out = out

    def process_record(self, ctx, record):
        ctx.produce(self.out, {"key": ctx.key})


def build(name: str, prefix: str, on_error: str = "dead_letter") -> Pipeline:
    pipeline = Pipeline(name, partitions=1)
    pipeline.source(f"{prefix}in")
    pipeline.source(f"{prefix}keyed")
    pipeline.computation(
        "echo",
        lambda: Echo(f"{prefix}out", f"{prefix}avro-out"),
        inputs={f"{prefix}in": None},
        outputs={f"{prefix}out": None, f"{prefix}avro-out": "wordcount.WordCount"},
        on_error=on_error,
    )
    pipeline.computation(
        "rekeyed",
        lambda: Rekeyed(f"{prefix}rekeyed-out"),
        inputs={f"{prefix}keyed": lambda r: r.value.get("k")},
        outputs={f"{prefix}rekeyed-out": None},
    )
    return pipeline
