"""bench/throughput.py's logic: the reference of a count, how outputs are read as counts, the
ratios and aim lines (by CPU per record), and a failed check's exit without figures."""

from __future__ import annotations

import collections
import json

from bench import throughput
from framework.serde.catalogue import encoder_for


class Msg:
    def __init__(self, key: bytes | None, value: bytes) -> None:
        self._key, self._value = key, value

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes:
        return self._value


def test_the_reference_counts_each_word_from_one_and_copies_for_the_bare_loop() -> None:
    warm = collections.Counter((w, w, 1) for w in throughput.warmups())
    assert throughput.reference(["a", "b", "a"]) == warm + collections.Counter(
        [("a", "a", 1), ("b", "b", 1), ("a", "a", 2)]
    )
    copies = throughput.reference(["a", "b", "a"], copies=True)
    assert copies[("a", "a", None)] == 2 and copies[("b", "b", None)] == 1


def test_every_contender_s_output_reads_as_key_word_and_count() -> None:
    avro = encoder_for("wordcount.WordCount")({"word": "w1", "count": 3})
    assert throughput.word_count(Msg(b"w1", avro)) == ("w1", "w1", 3)
    wire = b"\x00\x00\x00\x00\x07" + avro[10:]  # magic byte, schema id 7, the same Avro body
    assert throughput.word_count(Msg(b"w1", wire)) == ("w1", "w1", 3)
    peer = json.dumps({"word": "w1", "count": 3}).encode()
    assert throughput.word_count(Msg(b"w1", peer)) == ("w1", "w1", 3)
    assert throughput.word_count(Msg(b"w1", b'{"word": "w1"}')) == ("w1", "w1", None)


def rows(**cpu: float) -> list[dict]:
    names = {"bare": "bare loop", "floor": "hand-written exactly_once"}
    names |= {"eos": "logwheel exactly_once", "alo": "logwheel at_least_once"}
    names |= {"quix": "quix exactly_once"}
    return throughput.ratios(
        [
            {"contender": names[k], "records_per_s": 100 / v, "cpu_us_per_record": v}
            for k, v in cpu.items()
        ]
    )


def test_ratios_are_to_the_bare_loop_and_to_exactly_once_of_the_same_rows() -> None:
    bare, eos, alo = rows(bare=1.0, eos=4.0, alo=2.0)
    assert (eos["ratio"], eos["cpu_ratio"]) == (0.25, 0.25)
    assert (alo["vs_logwheel_eos"], alo["cpu_vs_logwheel_eos"]) == (2.0, 0.5)
    assert bare["cpu_vs_logwheel_eos"] == 0.25


def test_the_bare_loop_aim_is_judged_by_cpu_per_record_not_wall_time() -> None:
    measured = rows(bare=1.0, eos=4.0)
    measured[1]["records_per_s"] = measured[0]["records_per_s"]  # as fast by the wall clock
    measured = throughput.ratios(measured)
    assert measured[1]["ratio"] == 1.0
    line = throughput.half_of_bare(measured)
    assert "NOT met (0.25x: 4.0 vs 1.0 us)" in line
    assert "met (0.50x" in throughput.half_of_bare(rows(bare=1.0, eos=2.0))


def test_the_framework_share_compares_logwheel_with_the_hand_written_loop() -> None:
    measured = rows(bare=1.5, floor=4.5, eos=6.75)
    line = throughput.framework_share(measured)
    assert "6.8 us/record, the hand-written loop 4.5 (1.50x)" in line
    assert "(the hand-written loop 3.00x it, logwheel 4.50x)" in line
    assert "not measured" in throughput.framework_share(measured[:2])


def test_a_shorter_contender_is_compared_with_logwheel_on_its_own_shorter_input() -> None:
    main = rows(bare=1.0, eos=4.0)
    short = [
        {"contender": "logwheel at_least_once", "cpu_us_per_record": 5.0, "input": "first 1/20"},
        {"contender": "faust at_least_once", "cpu_us_per_record": 200.0, "input": "first 1/20"},
    ]
    for r in short:
        r["records"] = 50
    lines = throughput.beside_shorter([r | {"input": "all"} for r in main] + short)
    assert lines == [
        "faust at_least_once on the first 1/20 of the input (50 records): 200.0 us/record,"
        " logwheel at_least_once 5.0 on the same records (40.0x)"
    ]


def test_a_failed_check_exits_1_and_prints_no_figure(tmp_path, monkeypatch, capsys) -> None:
    measured = rows(bare=1.0, eos=4.0)
    for r in measured:
        r.update(input="all", distinct=1, records=10, seconds=1.0, first_s=0.1, startup_s=1.0)
        r.update(peak_rss_mb=1.0, missing=0, unexpected=0, duplicated=0, late=0, examples=[])
    measured[1].update(missing=1, examples=["missing ('w', 'w', 2)"])
    monkeypatch.setattr(throughput, "run", lambda args, contenders: measured)
    out = tmp_path / "t.json"
    code = throughput.main(["--bootstrap", "localhost:1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1
    assert (
        "FAILED: logwheel exactly_once (all input): WRONG: 1 missing, 0 unexpected, "
        "0 duplicated, 0 late (e.g. missing ('w', 'w', 2))"
    ) in printed
    assert "aim" not in printed and "records/s" not in printed
    failed = [line for line in printed.splitlines() if line.startswith("FAILED")]
    assert json.loads(out.read_text())["failed"] == failed


def test_the_quix_aim_is_per_guarantee_by_cpu() -> None:
    measured = [
        {"contender": "logwheel exactly_once", "cpu_us_per_record": 4.0},
        {"contender": "quix exactly_once", "cpu_us_per_record": 10.0},
    ]
    (line,) = throughput.half_of_quix(measured)
    assert "exactly_once CPU/record <= 0.5x Quix Streams': met (4.0 vs 10.0 us, 0.40x)" in line
