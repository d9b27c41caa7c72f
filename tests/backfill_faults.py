"""Faults for backfill tests, injected by a test-only computation instead of a switch in
logwheel's own code: wordcount whose CountWords, in the first attempt of Spark task `task`
and while the file `armed` exists, crashes (or with `stall`, stops) once it has had `after`
outputs sent to the broker inside its open transaction. The backfill's job module builds it
(`Wordcount(factory=...)`), so Spark's Python workers import this module (the repository is
on their PYTHONPATH)."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from framework.core.pipeline import Pipeline
from jobs.wordcount import CountWords, build


class Crash(BaseException):  # noqa: N818 - not an Exception: no hook policy may catch it
    """Ends the Spark task, as a crash of its worker would."""


class FaultyCountWords(CountWords):
    def __init__(self, counts: str, task: int, after: int, stall: bool, armed: str) -> None:
        super().__init__(counts)
        self.task, self.after, self.stall, self.armed = task, after, stall, armed
        self.seen = 0

    def process_record(self, ctx, record):
        from pyspark import TaskContext

        spark_task = TaskContext.get()
        here = spark_task is not None and spark_task.partitionId() == self.task
        if here and spark_task.attemptNumber() == 0 and os.path.exists(self.armed):
            self.seen += 1
            if self.seen > self.after:  # `after` outputs of earlier records are produced
                time.sleep(2)  # the producer sends them: on the broker, uncommitted
                while self.stall:
                    time.sleep(1)
                raise Crash(f"task {self.task} failing on purpose after {self.after} outputs")
        super().process_record(ctx, record)


def faulty_wordcount(
    name: str, prefix: str, guarantee: str, task: int, after: int, stall: bool, armed: str
) -> Pipeline:
    pipeline = build(name, prefix, guarantee)
    counts = f"{prefix}word-counts"
    spec = pipeline["count-words"]
    return pipeline.redeclared(
        replace(spec, factory=lambda: FaultyCountWords(counts, task, after, stall, armed))
    )
