"""Injectors seed the low watermark (MillWheel §5.2) on a real broker, read by a real
`logwheel run`: an injector run as several processes is known only once every process has
reported, and then its minimum governs; the file injector of the paper's Figure 10 promises the
oldest modification time among its unfinished files."""

from __future__ import annotations

import json
import os
import time

import pytest
from confluent_kafka.admin import AdminClient

from framework import InjectorWatermark, Pipeline
from framework.core.api import MIN_TIME
from framework.core.watermarks import Published
from framework.kafka.partitioning import key_partition
from framework.kafka.topic_ends import end_offsets
from framework.streaming.injector import FileInjector, Injector
from tests.support import (
    import_job,
    job_source,
    json_values,
    read_marks,
    read_topic,
    start_job,
    unique_name,
    wait_for,
    write_job,
)

pytestmark = pytest.mark.timeout(120)

WINDOW = 1_000
BASE = 1_700_000_000_000  # a multiple of WINDOW


# -- several injector processes ----------------------------------------------------------------

TWO_PROCESSES_JOB = """
from framework import Computation, Pipeline
from framework.core.pipeline import InjectorWatermark

WINDOW = 1000


class WindowCounter(Computation):
    def process_record(self, ctx, record):
        start = record.timestamp - record.timestamp % WINDOW
        windows = ctx.state.setdefault("windows", {})
        windows[str(start)] = windows.get(str(start), 0) + 1
        ctx.set_timer(str(start), start + WINDOW)
        ctx.produce(SEEN, {"timestamp": record.timestamp})

    def process_timer(self, ctx, timer):
        count = ctx.state.get("windows", {}).pop(timer.tag, 0)
        ctx.produce(COUNTS, {"key": ctx.key, "window_start": int(timer.tag), "count": count})


NAME, SOURCE, COUNTS, SEEN = NAMES
pipeline = Pipeline(NAME)
pipeline.source(SOURCE, watermark=InjectorWatermark("gen", processes=2))
pipeline.computation(
    "windows", WindowCounter, inputs={SOURCE: None}, outputs={COUNTS: None, SEEN: None}
)
"""

KEYS = ["a", "b", "c", "d"]


def test_two_injector_processes_the_minimum_governs(kafka, tmp_path):
    """Process 0 promises 3 windows: nothing fires, process 1 has not reported. Process 1
    promises 1 window: only that one fires. Process 1 catches up: the other two fire."""
    name = unique_name("inj-two")
    names = (name, f"{name}-src", f"{name}-counts", f"{name}-seen")
    _, source, counts_topic, seen_topic = names
    module = write_job(tmp_path, name.replace("-", "_"), job_source(TWO_PROCESSES_JOB, NAMES=names))
    pipeline = import_job(tmp_path, module).pipeline
    job = start_job(tmp_path, module, kafka)

    def send(injector: Injector, window: int, n: int) -> None:
        for key in KEYS:
            for j in range(n):
                ts = BASE + window * WINDOW + j * 10
                injector.send(source, {"j": j}, key=key, timestamp=ts)

    def counts() -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for v in json_values(read_topic(kafka, counts_topic, idle=1.0, timeout=10)):
            out.setdefault((v["key"], v["window_start"] - BASE), []).append(v["count"])
        return out

    try:
        with (
            Injector(pipeline, "gen", bootstrap=kafka, process=0) as first,
            Injector(pipeline, "gen", bootstrap=kafka, process=1) as second,
        ):
            for window in range(3):
                send(first, window, 10)
            first.advance(BASE + 3 * WINDOW)
            seen = 3 * 10 * len(KEYS)
            read_topic(kafka, seen_topic, expect=seen, timeout=30)
            time.sleep(2)  # a few more polls of the channel and commits: still nothing due
            assert counts() == {}, "a window fired before the second injector reported"

            send(second, 0, 5)
            send(second, 1, 5)
            second.advance(BASE + WINDOW)
            wait_for(lambda: len(counts()) >= len(KEYS), 30, what="window 0 to close")
            time.sleep(2)
            assert counts() == {(k, 0): [15] for k in KEYS}, "only window 0 is below the minimum"

            second.advance(BASE + 3 * WINDOW)
            wait_for(lambda: len(counts()) >= 3 * len(KEYS), 30, what="windows 1 and 2 to close")
            time.sleep(1)
            final = counts()
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    truth = {(k, w * WINDOW): [c] for k in KEYS for w, c in ((0, 15), (1, 15), (2, 10))}
    assert final == truth


# -- Figure 10: a file injector -----------------------------------------------------------------

FILES_JOB = """
from framework import Computation, Pipeline
from framework.core.pipeline import InjectorWatermark


class Collect(Computation):
    def process_record(self, ctx, record):
        ctx.produce(OUT, {**record.value, "low_watermark": ctx.low_watermark})

    def on_late_record(self, ctx, record):
        ctx.produce(LATE, record.value)


NAME, SOURCE, OUT, LATE = NAMES
pipeline = Pipeline(NAME)
pipeline.source(SOURCE, watermark=InjectorWatermark("files"))
pipeline.computation("collect", Collect, inputs={SOURCE: None}, outputs={OUT: None, LATE: None})
"""

LINES_PER_FILE = 5


def parse(line: str) -> tuple[str, dict, int]:
    value = json.loads(line)
    return value["file"], value, value["timestamp"]


def test_file_injector_watermark_is_the_oldest_unfinished_file(kafka, tmp_path):
    """Files of JSON lines, modified at known times, in an order their names do not follow:
    after each file the injector promises the oldest modification time among the files left,
    and about now once none is left; every line arrives downstream once, none late."""
    name = unique_name("inj-files")
    names = (name, f"{name}-src", f"{name}-out", f"{name}-late")
    _, source, out_topic, late_topic = names
    module = write_job(tmp_path, name.replace("-", "_"), job_source(FILES_JOB, NAMES=names))
    pipeline = import_job(tmp_path, module).pipeline
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    hour_ago = (time.time_ns() // 1_000_000_000 - 3600) * 1000  # whole seconds, in ms
    mtimes = {"a.jsonl": hour_ago + 200_000, "b.jsonl": hour_ago, "c.jsonl": hour_ago + 100_000}
    for file, mtime in mtimes.items():
        # a file's lines are no older than the file: its creation bounds them (Figure 10)
        lines = [
            json.dumps({"file": file, "n": n, "timestamp": mtime + n * 1000})
            for n in range(LINES_PER_FILE)
        ]
        (inbox / file).write_text("\n".join(lines) + "\n")
        os.utime(inbox / file, ns=(mtime * 1_000_000, mtime * 1_000_000))
    job = start_job(tmp_path, module, kafka)
    try:
        with Injector(pipeline, "files", bootstrap=kafka) as injector:
            files = FileInjector(injector, source, inbox, parse)
            before = time.time_ns() // 1_000_000
            sent = files.run_once()
            after = time.time_ns() // 1_000_000
            assert files.run_once() == 0, "finished files are ingested once"
        total = LINES_PER_FILE * len(mtimes)
        out = json_values(read_topic(kafka, out_topic, expect=total, timeout=30))
        out += json_values(read_topic(kafka, out_topic, idle=1.0, timeout=10))[len(out) :]
        late = read_topic(kafka, late_topic, idle=0.5, timeout=5)
        marks = read_marks(kafka, f"{name}.files.watermarks", idle=0.5, timeout=10)
        downstream = wait_for(
            lambda: [
                m.watermark
                for m in read_marks(kafka, f"{name}.collect.watermarks", idle=0.5, timeout=10)
                if m.watermark >= before
            ],
            30,
            what="the collecting computation's watermark to reach the injector's last",
        )
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    assert sent == total
    # b (oldest) first: then c is the oldest left, then a, then none
    values = [m.watermark for m in marks]
    assert values[:2] == [mtimes["c.jsonl"], mtimes["a.jsonl"]], values
    # after the last file: now; and the idle second pass moves it on to its own now
    assert len(values) == 4 and before <= values[2] <= after <= values[3], (values, before, after)
    assert {m.producer for m in marks} == {"files/injector/0"}
    lines = sorted((v["file"], v["n"]) for v in out)
    assert lines == sorted((f, n) for f in mtimes for n in range(LINES_PER_FILE)), "lost or twice"
    assert not late, json_values(late)
    # each file's lines were processed under the watermark promised before that file was read
    bound = {"b.jsonl": MIN_TIME, "c.jsonl": mtimes["c.jsonl"], "a.jsonl": mtimes["a.jsonl"]}
    for v in out:
        assert v["low_watermark"] <= v["timestamp"], v
        assert v["low_watermark"] <= bound[v["file"]] or v["low_watermark"] == MIN_TIME, v
    assert max(downstream) <= values[3]


# -- a new incarnation of an injector process ---------------------------------------------------


def test_a_new_incarnation_claims_what_the_last_one_wrote(kafka):
    """The chaos run's feeder makes a new injector after each broker fault. Its marks must
    still name the end of every partition the earlier incarnation wrote: a reader that starts
    gets only the channel's latest mark, and applied at once to a partition it has not read, it
    would make that partition's older records late (the undercount of the earliest windows)."""
    name = unique_name("inj-again")
    source = f"{name}-src"
    pipeline = Pipeline(name, partitions=2)
    pipeline.source(source, watermark=InjectorWatermark("gen"))
    keys = {key_partition(k, 2): k for k in ("a", "b", "c", "d")}  # one key per partition
    first = Injector(pipeline, "gen", bootstrap=kafka)
    for p in (0, 1):
        first.send(source, {"n": p}, key=keys[p], timestamp=BASE + p)
    first.advance(BASE + WINDOW)
    # the first incarnation dies; the next writes only partition 1 and promises more
    with Injector(pipeline, "gen", bootstrap=kafka) as second:
        second.send(source, {"n": 2}, key=keys[1], timestamp=BASE + WINDOW)
        second.advance(BASE + 2 * WINDOW)
    assert len(read_topic(kafka, source, expect=3)) == 3
    ends = end_offsets(AdminClient({"bootstrap.servers": kafka}), [(source, 0), (source, 1)],
                       committed=True)  # fmt: skip
    latest = read_marks(kafka, f"{name}.gen.watermarks", idle=0.5, timeout=10)[-1]
    assert latest.watermark == BASE + 2 * WINDOW
    for p in (0, 1):
        reader = Published(source, p, [latest.producer])  # a reader that starts now
        reader.offer(latest)
        reader.advance(0)
        assert reader.value() == (None, False), f"applied to partition {p} before reading it"
        reader.advance(ends[(source, p)])  # past the records and their commit markers
        assert reader.value() == (BASE + 2 * WINDOW, False)


def test_an_injector_that_promises_nothing_new_writes_nothing(kafka):
    """An idle injector advancing on a timer: the same promise again, with nothing sent, is no
    transaction and no mark (issue 25: an idle job writes nothing to the broker)."""
    name = unique_name("inj-idle")
    pipeline = Pipeline(name, partitions=1).source(
        f"{name}-src", watermark=InjectorWatermark("gen")
    )
    channel = f"{name}.gen.watermarks"
    admin = AdminClient({"bootstrap.servers": kafka})
    with Injector(pipeline, "gen", bootstrap=kafka) as injector:
        injector.advance(BASE)
        written = end_offsets(admin, [(channel, 0)], committed=False)
        for _ in range(3):
            injector.advance(BASE)  # nothing moved
            injector.advance(BASE - 1)  # a lower promise is the same promise
        assert end_offsets(admin, [(channel, 0)], committed=False) == written
        injector.advance(BASE + 1)  # and a new one is published
        assert end_offsets(admin, [(channel, 0)], committed=False) != written
