"""Nothing waits forever (`hook_timeout_ms`; issue 38, finding 9), in real
`logwheel run` processes on the real broker: a hook blocked for good — interruptibly, in a
wait no signal ends, in a timer, holding the GIL — has its record (or timer) dead-lettered at
stage "timeout"; every other record is counted exactly once; `logwheel run` stays up."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.integration.hangs_job import HOOK_TIMEOUT_MS
from tests.support import UniqueJob, produce, read_topic

pytestmark = pytest.mark.timeout(600)


def _send(job_def: UniqueJob, n: int, hangs: dict[int, str]) -> dict[str, list[int]]:
    """`n` records with seq 0..n-1 over four keys, those in `hangs` hanging as named; the
    seqs each key's counts must carry, in order."""
    records, counted = [], defaultdict(list)
    for seq in range(n):
        key, value = f"k{seq % 4}", {"seq": seq}
        if seq in hangs:
            value["hang"] = hangs[seq]
        if hangs.get(seq) in (None, "timer"):  # a hanging timer's record counts
            counted[key].append(seq)
        records.append((key, value, None))
    produce(job_def.bootstrap, f"{job_def.prefix}in", records)
    return counted


def _check_exactly_once(job_def: UniqueJob, counted: dict[str, list[int]]) -> None:
    expect = sum(len(seqs) for seqs in counted.values())
    out = read_topic(
        job_def.bootstrap, f"{job_def.prefix}out", expect=expect, timeout=240, to_end=True
    )
    seen = defaultdict(list)
    for value in (json.loads(m.value()) for m in out):
        seen[value["key"]].append((value["n"], value["seq"]))
    for key, seqs in counted.items():  # each count once, 1..n, in the order of the input
        assert sorted(seen[key]) == list(enumerate(seqs, 1)), key
    assert set(seen) == set(counted)


def _dead_letters(job_def: UniqueJob, expect: int) -> list[tuple[dict, bytes]]:
    dlq = f"{job_def.name}.count.dlq"
    dead = read_topic(job_def.bootstrap, dlq, expect=expect, timeout=240, to_end=True)
    letters = [({k: v.decode() for k, v in m.headers()}, m.value()) for m in dead]
    assert len(letters) == expect, letters
    assert {h["logwheel.error.stage"] for h, _ in letters} == {"timeout"}
    return letters


def test_hooks_blocked_for_good_are_dead_lettered_and_the_rest_counted_once(kafka, tmp_path):
    """One record's hook sleeps (interrupted in place: its membership ends, the next one
    dead-letters it), one waits on a mutex no signal ends (the process starts again in place,
    same pid), one's timer sleeps (the timer dead-lettered, described)."""
    job_def = UniqueJob(kafka, tmp_path, "tests.integration.hangs_job:build", "hang")
    counted = _send(job_def, 180, {40: "sleep", 90: "mutex", 140: "timer"})
    job = job_def.job().start()
    try:
        _check_exactly_once(job_def, counted)
        letters = _dead_letters(job_def, 3)
        assert job.alive(), job.output()[-3000:]  # the same process: restarted in place
    finally:
        job.stop()
    inp = f"{job_def.prefix}in"
    records = sorted(json.loads(v)["seq"] for h, v in letters if h["logwheel.source.topic"])
    assert records == [40, 90]
    assert all(h["logwheel.source.topic"] in ("", inp) for h, _ in letters)
    (timer,) = [json.loads(v) for h, v in letters if not h["logwheel.source.topic"]]
    assert (timer["timer"], timer["domain"]) == ("stuck", "processing")
    log = job.output()
    assert log.count(f"ran past hook_timeout_ms={HOOK_TIMEOUT_MS}: abandoning it") >= 3, log
    assert log.count("is still running 1 s after it was interrupted: starting the process") == 1


def test_a_hook_holding_the_gil_ends_its_process_and_the_supervisor_starts_it_again(
    kafka, tmp_path
):
    """A regular expression backtracking for good (ReDoS) holds the GIL: no thread of its
    process runs. Its dead-man switch ends it; `logwheel run` of two computations starts it
    again (its other computation unaffected); that process writes each call down, is ended
    by the switch again, and the one after dead-letters the record and goes on."""
    job_def = UniqueJob(kafka, tmp_path, "tests.integration.hangs_job:build_two", "gil")
    counted = _send(job_def, 60, {20: "regex"})
    job = job_def.job().start()
    try:
        echoed = read_topic(kafka, f"{job_def.prefix}echoed", expect=60, timeout=240, to_end=True)
        assert sorted(json.loads(m.value())["seq"] for m in echoed) == list(range(60))
        _check_exactly_once(job_def, counted)
        ((headers, value),) = _dead_letters(job_def, 1)
        assert json.loads(value)["seq"] == 20
        assert "held the GIL" in headers["logwheel.error"]
        assert job.alive(), job.output()[-3000:]
    finally:
        job.stop()
    log = job.output()
    assert log.count("computation count was ended by its dead-man switch") == 2, log
    assert "which call is not known: this process writes each call down" in log
