"""An independent verifier: from the input topics alone it derives what the pipelines must
have written, then reads what they did write and counts the differences.

It knows the jobs' specifications (wordcount: per word the counts 1..n; windowed: per key and
one-second window the number of events, per window the total, per ten-second bucket the total)
and the rules of the contract for bad input (which stage refuses which record), but none of the
runtime's state: it decodes with plain JSON and the schema's Avro codec, and learns the key of
each task from where the runtime's repartition topics put it.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from framework.core.watermarks import decode_mark
from framework.serde.catalogue import decoder_for
from framework.serde.codecs import DecodeError
from tests.chaos.windows_job import BUCKET, WINDOW
from tests.support import read_topic

AHEAD_MS = 3_600_000  # Kafka 4 refuses a record more than an hour ahead of the broker's clock
TOO_BIG = 500_000  # a word or query this long cannot fit a 1 MB topic (none comes near it)


@dataclass
class Report:
    """What the verifier found; `ok` when nothing is lost, duplicated or wrong."""

    records: int = 0
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    changelog_wrong: int = 0
    dead_letters: int = 0
    dead_letters_expected: int = 0
    dead_letters_missing: int = 0
    dead_letters_unexpected: int = 0
    dead_letters_bad_reason: int = 0
    watermark_regressions: int = 0
    marks: int = 0
    timers_checked: int = 0
    timers_early: int = 0
    unchecked: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated or wrong, and the marks and timers were checked at all: a
        channel without a mark, or a windowed stage none of whose timers met a mark, would
        let `watermark_regressions=0/0` pass for a verified run."""
        bad = (self.lost, self.duplicated, self.wrong, self.changelog_wrong)
        bad += (self.dead_letters_missing, self.dead_letters_unexpected)
        bad += (self.dead_letters_bad_reason, self.watermark_regressions, self.timers_early)
        checked = self.marks > 0 and self.timers_checked > 0 and not self.unchecked
        return not any(bad) and checked

    def note(self, text: str) -> None:
        if len(self.details) < 30:
            self.details.append(text)


def _read(bootstrap: str, topic: str) -> list:
    """Every record of `topic`, to its end: the run has settled, nothing writes any more."""
    return read_topic(bootstrap, topic, timeout=600, to_end=True)


def _read_all(bootstrap: str, topics: list[str]) -> dict[str, list]:
    """`_read` of every topic a pipeline's verification looks at, side by side: one after
    the other they took 0.6-1 s each, 17 s for the two pipelines under `make test`'s load."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(topics, pool.map(lambda t: _read(bootstrap, t), topics), strict=True))


def _headers(msg) -> dict[str, str]:
    return {k: (v or b"").decode(errors="replace") for k, v in (msg.headers() or [])}


def _ahead(msg, now_ms: int) -> bool:
    return msg.timestamp()[1] > now_ms + AHEAD_MS


# -- what the input says ---------------------------------------------------------------------


def classify_line(msg, now_ms: int) -> tuple[str, object]:
    """("ok", words) for a line wordcount counts, else ("dlq", the stage that refuses it)."""
    raw = msg.value()
    if raw is None:
        return "dlq", "decode"
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "dlq", "decode"
    if not isinstance(value, dict) or not isinstance(value.get("line"), str):
        return "dlq", "process_record"
    words = value["line"].split()
    if _ahead(msg, now_ms) or any(len(w) > TOO_BIG for w in words):
        return "dlq", "produce"
    return "ok", words


_SEARCH_QUERY = decoder_for("zeitgeist.SearchQuery")


def classify_event(msg, now_ms: int) -> tuple[str, object]:
    """("ok", query) for an event the windowed pipeline counts, else ("dlq", stage)."""
    try:
        value = _SEARCH_QUERY(msg.value())
    except DecodeError:
        return "dlq", "decode"
    if _ahead(msg, now_ms) or len(value["query"]) > TOO_BIG:
        return "dlq", "produce"
    return "ok", value["query"]


# -- checks ----------------------------------------------------------------------------------


def check_once(report: Report, what: str, expected: dict, found: list[tuple]) -> None:
    """Each expected (key -> value) present exactly once with that value."""
    seen: dict = defaultdict(list)
    for key, value in found:
        seen[key].append(value)
    for key, value in expected.items():
        got = seen.pop(key, [])
        if not got:
            report.lost += 1
            report.note(f"{what} {key}: missing (expected {value})")
            continue
        report.duplicated += len(got) - 1
        if len(got) > 1:
            report.note(f"{what} {key}: {len(got)} times {got[:4]}")
        if any(g != value for g in got):
            report.wrong += 1
            report.note(f"{what} {key}: {got[:4]}, expected {value}")
    for key, got in seen.items():
        report.wrong += len(got)
        report.note(f"{what} {key}: {got[:4]} not expected at all")


def check_dead_letters(report: Report, dlq: list, expected: dict, source: str) -> None:
    """`expected`: (partition, offset) of `source` -> stage. Each once, with a reason."""
    found: dict = defaultdict(list)
    for msg in dlq:
        h = _headers(msg)
        if h.get("logwheel.source.topic") != source:
            continue
        at = (int(h.get("logwheel.source.partition", -1)), int(h.get("logwheel.source.offset", -1)))
        found[at].append(h)
        report.dead_letters += 1
    for at, stage in expected.items():
        got = found.pop(at, [])
        if not got:
            report.dead_letters_missing += 1
            report.note(f"dead letter of {source}@{at} ({stage}) missing")
            continue
        report.duplicated += len(got) - 1
        h = got[0]
        if h.get("logwheel.error.stage") != stage or not h.get("logwheel.error"):
            report.dead_letters_bad_reason += 1
            report.note(
                f"dead letter of {source}@{at}: stage {h.get('logwheel.error.stage')} "
                f"({h.get('logwheel.error', '')[:80]}), expected {stage}"
            )
    for at, got in found.items():
        report.dead_letters_unexpected += len(got)
        report.note(f"unexpected dead letter of {source}@{at}: {got[0].get('logwheel.error')}")


def check_marks(
    report: Report, bootstrap: str, channel: str, read: list | None = None
) -> dict[str, list]:
    """Every producer's watermarks on `channel` (its records `read` already, else read now)
    never go back; returns marks per producer with their channel offsets."""
    by_producer: dict[str, list] = defaultdict(list)
    read = _read(bootstrap, channel) if read is None else read
    msgs = [m for m in read if m.value() is not None]
    if not msgs:
        report.unchecked.append(f"{channel}: no mark")
    for msg in sorted(msgs, key=lambda m: (m.partition(), m.offset())):
        mark = decode_mark(msg.value())
        report.marks += 1
        history = by_producer[mark.producer]
        if history and mark.watermark < history[-1].watermark:
            report.watermark_regressions += 1
            report.note(
                f"{channel} {mark.producer}: watermark {history[-1].watermark} -> {mark.watermark}"
            )
        history.append(mark)
    return by_producer


def check_timers(
    report: Report, outputs: list, size: int, task_of: dict[str, int], marks: dict, computation: str
) -> None:
    """No event-time timer fired before its task's input watermark reached it: the first mark
    the firing task published with (or after) an output must show an input watermark at or
    past the window's end. None checked at all is noted in `report.unchecked`."""
    before = report.timers_checked
    for msg in outputs:
        value = json.loads(msg.value())
        partition = task_of.get(value["key"])
        if partition is None:
            continue
        end, tp = value["window"] + size, (msg.topic(), msg.partition())
        for mark in marks.get(f"{computation}/task/{partition}", []):
            if mark.offsets.get(tp, -1) >= msg.offset():
                report.timers_checked += 1
                if mark.input_watermark < end:
                    report.timers_early += 1
                    report.note(
                        f"{computation}: timer {end} of {value['key']} fired at input "
                        f"watermark {mark.input_watermark}"
                    )
                break
    if report.timers_checked == before:
        report.unchecked.append(f"{computation}: no timer met a mark")


def _latest(msgs: list) -> dict[str, bytes | None]:
    latest = {}
    for msg in sorted(msgs, key=lambda m: (m.partition(), m.offset())):
        latest[msg.key().decode()] = msg.value()
    return latest


def open_windows(bootstrap: str, changelog: str, read: list | None = None) -> dict[str, bytes]:
    """The keys a windowed stage's changelog (its records `read` already, else read now) still
    holds state for, their latest values: a window not closed yet (every window closes once
    the input's last watermark passed it)."""
    state = _latest(_read(bootstrap, changelog) if read is None else read)
    return {k: v for k, v in state.items() if v is not None and json.loads(v)}


# -- the two pipelines -----------------------------------------------------------------------


def read_input(report: Report, msgs: list, classify) -> tuple[list, dict]:
    """Every record of an input topic (`msgs`), judged by `classify`: ([(msg, what it
    carries)] to process, {(partition, offset): stage} expected in the dead-letter topic)."""
    now = int(time.time() * 1000)
    good, expected_dlq = [], {}
    for msg in msgs:
        report.records += 1
        verdict, what = classify(msg, now)
        if verdict == "ok":
            good.append((msg, what))
        else:
            expected_dlq[(msg.partition(), msg.offset())] = what
    report.dead_letters_expected += len(expected_dlq)
    return good, expected_dlq


WC_READS = ("watermarks", "dlq")
"""What verify_wordcount reads of each of wordcount's computations besides its outputs."""


def verify_wordcount(report: Report, bootstrap: str, name: str, prefix: str) -> None:
    lines_topic, counts_topic = f"{prefix}lines", f"{prefix}word-counts"
    topics = [lines_topic, counts_topic, f"{name}.count-words.changelog"]
    topics += [f"{name}.{c}.{what}" for c in ("split-words", "count-words") for what in WC_READS]
    read = _read_all(bootstrap, topics)
    words: Counter = Counter()
    good, expected_dlq = read_input(report, read[lines_topic], classify_line)
    for _, line_words in good:
        words.update(line_words)
    decode = decoder_for("wordcount.WordCount")
    counts = [decode(m.value()) for m in read[counts_topic]]
    found = [((c["word"], c["count"]), c["count"]) for c in counts]
    # A count past the word's total means some line was counted twice: a duplicate.
    over = [f for f in found if f[1] > words.get(f[0][0], 0)]
    if over:
        report.duplicated += len(over)
        report.note(f"word-count: {len(over)} counts past the total, e.g. {over[:3]}")
    expected = {(w, i): i for w, n in words.items() for i in range(1, n + 1)}
    beyond = set(over)
    check_once(report, "word-count", expected, [f for f in found if f not in beyond])
    for msg in read[f"{name}.count-words.dlq"]:
        report.dead_letters_unexpected += 1
        report.note(f"count-words dead letter: {_headers(msg).get('logwheel.error')}")
    check_dead_letters(report, read[f"{name}.split-words.dlq"], expected_dlq, lines_topic)
    state = _latest(read[f"{name}.count-words.changelog"])
    for word, n in words.items():
        raw = state.get(word)
        doc = json.loads(raw) if raw else None
        if doc != {"count": n}:
            report.changelog_wrong += 1
            report.note(f"changelog {word}: {doc}, expected count {n}")
    for channel in ("split-words", "count-words"):
        marks = f"{name}.{channel}.watermarks"
        check_marks(report, bootstrap, marks, read[marks])


def verify_windows(report: Report, bootstrap: str, name: str, prefix: str) -> None:
    events_topic = f"{prefix}events"
    stages = {  # computation: (output, window size, keyed input)
        "count": ("counts", WINDOW, events_topic),
        "total": ("totals", WINDOW, f"{prefix}counts"),
        "rollup": ("rollups", BUCKET, f"{prefix}totals"),
    }
    topics = [events_topic, f"{name}.feeder.watermarks"]
    for computation, (output, _, keyed) in stages.items():
        topics += [f"{prefix}{output}", f"{name}.{computation}.{keyed}.by-key"]
        topics += [f"{name}.{computation}.{what}" for what in ("watermarks", "changelog", "dlq")]
    read = _read_all(bootstrap, topics)
    per_key: Counter = Counter()
    good, expected_dlq = read_input(report, read[events_topic], classify_event)
    for msg, query in good:
        ts = msg.timestamp()[1]
        per_key[(query, ts - ts % WINDOW)] += 1
    per_window: Counter = Counter()
    for (_, start), n in per_key.items():
        per_window[start] += n
    per_bucket: Counter = Counter()
    for start, n in per_window.items():
        per_bucket[start - start % BUCKET] += n
    expectations = {"count": per_key, "total": per_window, "rollup": per_bucket}
    check_marks(report, bootstrap, f"{name}.feeder.watermarks", read[f"{name}.feeder.watermarks"])
    for computation, (output, size, keyed) in stages.items():
        expected = expectations[computation]
        msgs = read[f"{prefix}{output}"]
        values = [json.loads(m.value()) for m in msgs]
        if computation == "count":
            found = [((v["key"], v["window"]), v["total"]) for v in values]
        else:
            found = [(v["window"], v["total"]) for v in values]
        check_once(report, output, dict(expected), found)
        by_key = read[f"{name}.{computation}.{keyed}.by-key"]
        task_of = {m.key().decode(): m.partition() for m in by_key}
        channel = f"{name}.{computation}.watermarks"
        marks = check_marks(report, bootstrap, channel, read[channel])
        check_timers(report, msgs, size, task_of, marks, computation)
        changelog = f"{name}.{computation}.changelog"
        left = open_windows(bootstrap, changelog, read[changelog])
        if left:
            report.changelog_wrong += len(left)
            report.note(f"{computation} changelog keeps open windows: {list(left.items())[:3]}")
        if computation != "count":
            for msg in read[f"{name}.{computation}.dlq"]:
                report.dead_letters_unexpected += 1
                report.note(f"{computation} dead letter: {_headers(msg).get('logwheel.error')}")
    check_dead_letters(report, read[f"{name}.count.dlq"], expected_dlq, events_topic)


def summary(
    seed: int,
    report: Report,
    faults: dict[str, int],
    stall: float,
    hanging: list | None = None,
    with_cuts: float | None = None,
) -> str:
    """The one line a run prints; with `hanging` (find-hanging's rows), the cluster mode's:
    its longest stall counts only faults that met two nodes or more up and reachable, less the
    time a node was cut off from the clients (`with_cuts`: that time included)."""
    kinds = ",".join(f"{k}:{n}" for k, n in faults.items())
    mode = "single" if hanging is None else "cluster"
    stalled = "longest_stall" if hanging is None else "longest_stall_two_up"
    tail = "" if hanging is None else f" hanging_transactions={len(hanging)}"
    if with_cuts is not None:
        tail = f" ({with_cuts:.1f}s with proxy cuts){tail}"
    return (
        f"chaos mode={mode} seed={seed} records={report.records} "
        f"faults={sum(faults.values())}({kinds}) "
        f"lost={report.lost} duplicated={report.duplicated} wrong={report.wrong} "
        f"changelog_wrong={report.changelog_wrong} dead_letters={report.dead_letters}"
        f"/{report.dead_letters_expected} (missing {report.dead_letters_missing}, unexpected "
        f"{report.dead_letters_unexpected}, bad reason {report.dead_letters_bad_reason}) "
        f"watermark_regressions={report.watermark_regressions}/{report.marks} "
        f"early_timers={report.timers_early}/{report.timers_checked} "
        f"unchecked={len(report.unchecked)} {stalled}={stall:.1f}s{tail}"
    )
