"""The seeded chaos run's schedule and verifier, without a broker: the same seed gives the same
faults (on one broker, the same as before the cluster kinds), the cluster kinds stay within
their bounds, stalls count only faults that met two nodes up, find-hanging's rows are counted,
and the verifier fails on a duplicate, a loss, a wrong value, a watermark that goes back, a
timer fired early and a dead letter missing or with the wrong stage."""

from __future__ import annotations

import json

from framework.core.watermarks import Mark, encode_mark
from framework.serde.catalogue import encoder_for
from tests.chaos.seeded import verifier
from tests.chaos.seeded.cluster import ClusterBroker, Outage, hanging_rows
from tests.chaos.seeded.run import OutputSampler
from tests.chaos.seeded.schedule import (
    CLUSTER_KINDS,
    CLUSTER_MODE_KINDS,
    KINDS,
    NODE_STOP_HOLD,
    Fault,
    by_kind,
    draw,
)
from tests.chaos.seeded.verifier import (
    Report,
    check_dead_letters,
    check_marks,
    check_once,
    check_timers,
    classify_event,
    classify_line,
    summary,
)
from tests.chaos.seeded.workload import YEAR_3000_MS

NOW = 1_800_000_000_000


class Msg:
    """The parts of a confluent_kafka.Message the verifier reads."""

    def __init__(self, value, *, ts=NOW - 1000, topic="t", partition=0, offset=0, headers=None):
        self._value, self._ts, self._headers = value, ts, headers
        self._topic, self._partition, self._offset = topic, partition, offset

    def value(self):
        return self._value

    def timestamp(self):
        return (1, self._ts)

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def headers(self):
        return self._headers


def test_a_seed_gives_the_same_schedule_with_every_kind():
    first, again = draw(7, 100, 10, 10), draw(7, 100, 10, 10)
    assert first == again and first != draw(8, 100, 10, 10)
    assert by_kind(first) == {kind: 10 for kind in KINDS}
    assert [f.at for f in first] == sorted(f.at for f in first)
    assert all(1 <= f.at <= 101 for f in first)


def test_the_single_broker_schedule_of_a_seed_is_the_one_it_always_was():
    """The cluster kinds were added without changing what a seed draws on one broker."""
    assert draw(20261123, 110, 10, 12)[:3] == [
        Fault(1.82, "broker-kill", 0, 1.98),
        Fault(2.0, "sigstop", 10, 5.64),
        Fault(2.64, "wipe-state", 10, 0.72),
    ]


def test_the_cluster_schedule_draws_every_broker_and_network_kind_within_its_bounds():
    per_kind = {**dict.fromkeys(CLUSTER_MODE_KINDS, 1), **dict.fromkeys(CLUSTER_KINDS, 5)}
    faults = draw(3, 600, per_kind, 10, kinds=CLUSTER_MODE_KINDS, cut_hold=(5.0, 60.0))
    assert by_kind(faults) == per_kind
    for f in faults:
        if f.kind in ("node-kill", "node-stop", "proxy-cut", "latency"):
            assert f.target in (1, 2, 3)
        if f.kind == "node-stop":
            assert NODE_STOP_HOLD[0] <= f.hold <= NODE_STOP_HOLD[1]
        if f.kind == "proxy-cut":
            assert 5.0 <= f.hold <= 60.0
        if f.kind == "latency":
            assert 200 <= f.latency_ms <= 2000
        if f.kind == "commit-reset":
            assert 0 <= f.target < 10 and f.hold < 1.0
        if f.kind == "controller-kill":
            assert f.target == 0  # chosen by role when it comes


def test_hanging_transactions_are_the_rows_find_hanging_prints():
    header = "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
    header += "LastTimestamp\tDuration(min)\t"
    assert hanging_rows(header + "\n") == []
    row = "out\t2\t1001\t0\t3\t4711\t1795670000000\t16\t"
    assert hanging_rows(f"some log line\n{header}\n{row}\n") == [row.strip()]


def test_a_fault_counts_toward_the_stall_only_while_two_nodes_are_up_and_reachable():
    broker = ClusterBroker.__new__(ClusterBroker)
    broker.cluster = type("Three", (), {"nodes": {1: None, 2: None, 3: None}})()
    broker.outages = [Outage(1, "node-kill", 10.0, 20.0), Outage(2, "proxy-cut", 15.0, None)]
    assert [broker.up_at(t) for t in (5.0, 12.0, 16.0, 25.0)] == [3, 2, 1, 2]


def test_the_time_a_node_was_cut_off_from_the_clients_is_left_out_of_a_stall():
    broker = ClusterBroker.__new__(ClusterBroker)
    broker.outages = [Outage(2, "proxy-cut", 110.0, 160.0), Outage(3, "node-kill", 90.0, 105.0)]
    assert broker.cut_off(89.5, 168.0) == 50.0  # the kill's own outage is not excused
    assert broker.cut_off(150.0, 200.0) == 10.0 and broker.cut_off(0.0, 100.0) == 0.0
    sampler = OutputSampler("unused:9092", [])
    sampler.samples = [(89.0, 10), (100.0, 10), (168.0, 11)]
    assert sampler.longest_stall([89.5], 1000.0) == 78.5
    assert sampler.longest_stall([89.5], 1000.0, broker.cut_off) == 28.5


def test_the_summary_names_the_mode_the_stall_and_hanging_transactions():
    single = summary(1, Report(), {"sigkill": 1}, 2.0)
    assert single.startswith("chaos mode=single seed=1 ") and "longest_stall=2.0s" in single
    cluster = summary(1, Report(), {"node-kill": 1}, 2.0, ["node 1: out ..."], 9.0)
    assert "chaos mode=cluster" in cluster and "longest_stall_two_up=2.0s" in cluster
    assert cluster.endswith("(9.0s with proxy cuts) hanging_transactions=1")


def test_lines_are_judged_from_their_bytes_alone():
    line = json.dumps({"line": "a b"}).encode()
    assert classify_line(Msg(line), NOW) == ("ok", ["a", "b"])
    assert classify_line(Msg(line, ts=0), NOW) == ("ok", ["a", "b"])
    assert classify_line(Msg(line, ts=YEAR_3000_MS), NOW) == ("dlq", "produce")
    assert classify_line(Msg(None), NOW) == ("dlq", "decode")
    assert classify_line(Msg(b"\xff\xfe{"), NOW) == ("dlq", "decode")
    assert classify_line(Msg(b'{"line": 42}'), NOW) == ("dlq", "process_record")
    assert classify_line(Msg(b'"a b"'), NOW) == ("dlq", "process_record")
    big = json.dumps({"line": "a " + "x" * 1_500_000}).encode()
    assert classify_line(Msg(big), NOW) == ("dlq", "produce")


def test_events_are_judged_from_their_bytes_alone():
    encode = encoder_for("zeitgeist.SearchQuery")
    assert classify_event(Msg(encode({"query": "q1"})), NOW) == ("ok", "q1")
    assert classify_event(Msg(encode({"query": "q1"}), ts=YEAR_3000_MS), NOW)[1] == "produce"
    unknown = b"\xc3\x01\xde\xad" + bytes(6) + b"\x04q1\x00\x00"
    assert classify_event(Msg(unknown), NOW) == ("dlq", "decode")
    assert classify_event(Msg(b'{"query": "q1"}'), NOW) == ("dlq", "decode")
    assert classify_event(Msg(None), NOW) == ("dlq", "decode")


def _checked() -> Report:
    """A report of a run whose marks and timers were checked, all in order."""
    return Report(marks=1, timers_checked=1)


def test_a_run_whose_marks_or_timers_were_never_checked_does_not_pass(monkeypatch):
    assert _checked().ok
    assert not Report().ok  # watermark_regressions=0/0, early_timers=0/0
    assert not Report(marks=1).ok and not Report(timers_checked=1).ok
    report = _checked()
    monkeypatch.setattr(verifier, "_read", lambda _bootstrap, _topic: [])  # a channel never written
    check_marks(report, "unused:9092", "silent.watermarks")
    assert report.unchecked == ["silent.watermarks: no mark"] and not report.ok
    report = _checked()
    output = Msg(json.dumps({"key": "k", "window": 1000, "total": 3}).encode(), topic="o")
    check_timers(report, [output], 1000, {"k": 2}, {"count/task/2": []}, "count")
    assert report.unchecked == ["count: no timer met a mark"] and not report.ok


def test_each_output_once_with_its_value():
    report = _checked()
    check_once(report, "x", {"a": 1, "b": 2}, [("a", 1), ("b", 2)])
    assert report.ok
    report = _checked()
    check_once(report, "x", {"a": 1, "b": 2, "c": 3}, [("a", 1), ("a", 1), ("b", 5), ("d", 1)])
    assert (report.duplicated, report.lost, report.wrong) == (1, 1, 2) and not report.ok


def _dead_letter(offset: int, stage: str, reason: str = "DecodeError: not JSON") -> Msg:
    headers = [
        ("logwheel.source.topic", b"in"),
        ("logwheel.source.partition", b"0"),
        ("logwheel.source.offset", str(offset).encode()),
        ("logwheel.error.stage", stage.encode()),
        ("logwheel.error", reason.encode()),
    ]
    return Msg(b"x", headers=headers)


def test_every_bad_record_once_in_the_dead_letters_with_its_stage():
    expected = {(0, 1): "decode", (0, 2): "produce"}
    report = _checked()
    check_dead_letters(
        report, [_dead_letter(1, "decode"), _dead_letter(2, "produce")], expected, "in"
    )
    assert report.ok and report.dead_letters == 2
    report = Report()
    dlq = [_dead_letter(1, "process_record"), _dead_letter(3, "decode")]
    check_dead_letters(report, dlq, expected, "in")
    assert report.dead_letters_bad_reason == 1
    assert report.dead_letters_missing == 1 and report.dead_letters_unexpected == 1


def test_a_timer_fired_before_its_watermark_is_caught():
    output = Msg(json.dumps({"key": "k", "window": 1000, "total": 3}).encode(), topic="o", offset=5)
    late_enough = Mark("count/task/2", 0, False, {("o", 0): 5}, input_watermark=2000)
    too_early = Mark("count/task/2", 0, False, {("o", 0): 7}, input_watermark=1999)
    for mark, early in ((late_enough, 0), (too_early, 1)):
        assert encode_mark(mark)  # a mark the runtime could have written
        report = Report()
        check_timers(report, [output], 1000, {"k": 2}, {"count/task/2": [mark]}, "count")
        assert (report.timers_checked, report.timers_early) == (1, early)
