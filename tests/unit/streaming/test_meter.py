"""The meter moves what the per-record path counted in plain integers into the Prometheus
metrics, once a second: each count added once (the growth since the last report), lags and
watermarks set from where the tasks are."""

from __future__ import annotations

from prometheus_client import REGISTRY

from framework import Computation, Pipeline
from framework.core.dead_letters import ErrorPolicy
from framework.core.timers import decode_timer
from framework.kafka.output import PartIO
from framework.state.store import TaskStore
from framework.streaming.meter import Meter
from framework.streaming.task import KeyedTask
from tests.unit.streaming.fakes import FakeCollector, FakeConsumer


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


def _sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_counts_grow_by_what_was_read_and_delivered_since_the_last_report(tmp_path):
    pipeline = Pipeline("meter", partitions=1).source("in")
    pipeline.computation("m", Noop, inputs={"in": None}, outputs={"out": None})
    spec = pipeline["m"]
    collector = FakeCollector()
    io = PartIO(pipeline, spec, collector, {"in": 1, "out": 1}, ErrorPolicy(spec.group, "skip"))
    task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))
    (inp,) = task.inputs
    consumer = FakeConsumer()
    consumer.add("in", 0, "abcdefghij")  # the partition ends at 10
    meter = Meter("m", consumer, collector)
    before_in = _sample("logwheel_records_in_total", computation="m", stream="in") or 0
    before_out = _sample("logwheel_records_out_total", computation="m", topic="out") or 0
    assert _sample("logwheel_commits_total", computation="m") == 0  # shown from the start

    inp.read, inp.position = 4, 4
    collector.delivered["out"] = 3
    meter.report([task], [inp])
    inp.read, inp.position = 7, 7
    collector.delivered["out"] = 5
    meter.report([task], [inp])
    meter.report([task], [inp])  # nothing new: nothing added

    assert _sample("logwheel_records_in_total", computation="m", stream="in") == before_in + 7
    assert _sample("logwheel_records_out_total", computation="m", topic="out") == before_out + 5
    assert _sample("logwheel_consumer_lag", computation="m", topic="in", partition="0") == 3
    task.close()


def test_a_keyed_tasks_watermarks_are_set_once_known(tmp_path):
    pipeline = Pipeline("meter2", partitions=1).source("in")
    pipeline.computation("meter-w", Noop, inputs={"in": None})
    spec = pipeline["meter-w"]
    collector = FakeCollector()
    io = PartIO(pipeline, spec, collector, {"in": 1}, ErrorPolicy(spec.group, "skip"))
    task = KeyedTask(io, 0, TaskStore(tmp_path / "task-0", decode_timer))
    meter = Meter("meter-w", FakeConsumer(), collector)
    meter.report([task], task.inputs)
    assert _sample("logwheel_input_low_watermark_ms", computation="meter-w", partition="0") is None

    task.executor.advance_watermark(5_000)
    meter.report([task], task.inputs)
    assert _sample("logwheel_input_low_watermark_ms", computation="meter-w", partition="0") == 5_000
    assert (
        _sample("logwheel_output_low_watermark_ms", computation="meter-w", partition="0") == 5_000
    )
    assert _sample("logwheel_watermark_lag_seconds", computation="meter-w", partition="0") > 0
    task.close()
