"""A job that fails on some records until a fix is deployed (tests only).

`events` (written by the injector "gen") is re-keyed by its user; a value {"i", "user", "bad"}
fails in the hook while its "bad" exceeds the level written in the file `fix` (0 while it does
not exist): "fixing" the code is writing a higher level there. A value without "user" fails in
the key extractor until the fix reaches level 1 (then its user is "nobody"). While the file
`hold` exists, the hook first touches `hold`.reached and then waits for it to go: the test kills
the job there, in the middle of a replay. Every record processed yields {"i", "user", "late"}
("late": its time was behind the input low watermark when it ran).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from framework import Computation, Pipeline
from framework.core.pipeline import InjectorWatermark


def level(fix: str) -> int:
    try:
        return int(Path(fix).read_text() or 0)
    except FileNotFoundError:
        return 0


class Tally(Computation):
    def __init__(self, out: str, fix: str, hold: str) -> None:
        self.out, self.fix, self.hold = out, fix, hold

    def process_record(self, ctx, record):
        if os.path.exists(self.hold):
            Path(f"{self.hold}.reached").touch()
            while os.path.exists(self.hold):
                time.sleep(0.05)
        bad = record.value.get("bad", 0)
        if bad > level(self.fix):
            raise ValueError(f"cannot handle bad={bad} before fix {bad}")
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        late = record.timestamp < ctx.low_watermark
        ctx.produce(self.out, {"i": record.value["i"], "user": ctx.key, "late": late})


def build(name: str, prefix: str, fix: str, hold: str) -> Pipeline:
    def user(record) -> str:
        if "user" in record.value:
            return record.value["user"]
        if level(fix) >= 1:
            return "nobody"
        raise KeyError("user")

    pipeline = Pipeline(name, partitions=2)
    pipeline.source(f"{prefix}events", watermark=InjectorWatermark("gen"))
    pipeline.computation(
        "tally",
        lambda: Tally(f"{prefix}tallies", fix, hold),
        inputs={f"{prefix}events": user},
        outputs={f"{prefix}tallies": None},
    )
    return pipeline
