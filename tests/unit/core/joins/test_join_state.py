"""The join's state is encoded once per commit, not per record (it vouches for it,
core/keyed_state.py): so what would have failed at the encode of every call is checked before
anything changes — a value that cannot be stored, a document that would pass the changelog's
limit, a pair its output refuses — and such a record is dead-lettered with the key's state and
the other records' matched flags as they were."""

from __future__ import annotations

from typing import Any

from framework.core.api import Record
from framework.core.executor import Executor
from framework.core.keyed_state import MemoryStateBackend
from framework.core.pipeline import Pipeline
from framework.core.timers import MemoryTimerBackend
from framework.errors import BadRecord
from framework.serde.json_codec import decode_json, encode_json


class Output:
    """Productions encoded as JSON; a pair of a left value {"refuse_pairs": True} is refused
    as its stream would refuse it."""

    def __init__(self) -> None:
        self.produced: list[dict] = []
        self.dead: list[tuple[Any, str]] = []

    def encode(self, stream: str, key: str, value: Any, timestamp: int, record_id: str) -> Any:
        if value["right"] is not None and (value["left"] or {}).get("refuse_pairs"):
            raise BadRecord("produce", "refused by the output")
        return decode_json(encode_json(value))

    def produce_all(self, encoded: list[Any]) -> None:
        self.produced += encoded

    def dead_letter(self, record: Any, error: BaseException, stage: str, source: Any = None):
        self.dead.append((record.value, stage))


class Join:
    """A left join (after_ms 10) on an executor over in-memory backends, committing on demand."""

    def __init__(self, state_max_bytes: int | None = None) -> None:
        pipeline = Pipeline("p")
        pipeline.source("orders")
        pipeline.source("payments")
        pipeline.join(
            "j", left="orders", right="payments", inputs={"orders": None, "payments": None},
            before_ms=0, after_ms=10, how="left", output="out",
        )  # fmt: skip
        self.state, self.timers, self.output = MemoryStateBackend(), MemoryTimerBackend(), Output()
        self.executor = Executor(
            pipeline["j"], self.state, self.timers, self.output, state_max_bytes=state_max_bytes
        )

    def send(self, stream: str, value: Any, ts: int, key: str = "k") -> None:
        self.executor.process(Record(key, value, ts, stream, f"{stream}-{ts}-{value}"))

    def commit(self) -> dict:
        self.state.apply(self.executor.state.changes())
        self.timers.apply(self.executor.timers.changes())
        self.executor.state.committed()
        self.executor.timers.committed()
        return {k: decode_json(raw) for k, raw in self.state.docs.items()}


def test_a_value_that_cannot_be_stored_is_dead_lettered_and_changes_nothing():
    j = Join()
    j.send("orders", {"id": "o1"}, 100)
    j.send("payments", {"id": "p1", "raw": b"\x00"}, 105)  # bytes: not JSON
    assert j.output.dead == [({"id": "p1", "raw": b"\x00"}, "state")]
    j.send("payments", {"id": "p2"}, 106)
    assert j.commit() == {"k": {"l": [[100, 1, {"id": "o1"}]], "r": [[106, 1, {"id": "p2"}]]}}
    assert [p["right"] for p in j.output.produced] == [{"id": "p2"}]


def test_a_pair_its_output_refuses_dead_letters_the_record_and_sets_no_matched_flag():
    j = Join()
    j.send("payments", {"id": "p0"}, 100)
    j.send("orders", {"id": "o1"}, 101)
    j.send("orders", {"id": "o2", "refuse_pairs": True}, 102)
    j.send("payments", {"id": "p1"}, 103)  # meets o1 (produced), then o2: refused
    assert j.output.dead == [({"id": "p1"}, "produce")]
    assert j.output.produced == []  # the call's first pair went with it
    j.executor.advance_watermark(10_000)
    assert [(p["left"], p["right"]) for p in j.output.produced] == [
        ({"id": "o1"}, None),  # never matched: produced alone once its window closed
        ({"id": "o2", "refuse_pairs": True}, None),
    ]
    assert j.commit() == {}


def test_a_record_that_would_pass_the_changelogs_limit_is_dead_lettered_state_as_it_was():
    j = Join(state_max_bytes=200)
    for i in range(5):  # about 20 bytes each, deferred (no commit between)
        j.send("orders", {"id": f"o{i}"}, 100 + i)
    j.send("orders", {"id": "x" * 100}, 106)  # past 200 bytes encoded
    assert j.output.dead == [({"id": "x" * 100}, "state")]
    j.send("payments", {"id": "p"}, 107)  # fits: meets o0..o4, stored with them
    doc = j.commit()["k"]
    assert [e[2]["id"] for e in doc["l"]] == [f"o{i}" for i in range(5)]
    assert all(e[1] == 1 for e in doc["l"]) and doc["r"] == [[107, 1, {"id": "p"}]]
    assert len(encode_json(doc)) + 1 <= 200


def test_state_as_sealed_per_record_before_loads_and_is_written_back_alike():
    """The document's format did not change with its encoding per commit: one the join wrote
    when it sealed after every record (encode_json of the same document) loads, meets its
    partners and expires, and what is written back decodes to the same shape."""
    j = Join()
    j.state.docs["k"] = encode_json({"l": [[100, 0, {"id": "o1"}], [104, 1, {"id": "o2"}]]})
    j.send("payments", {"id": "p1"}, 105)
    assert j.output.produced == [
        {"key": "k", "left": {"id": "o1"}, "right": {"id": "p1"}},
        {"key": "k", "left": {"id": "o2"}, "right": {"id": "p1"}},
    ]
    assert j.commit() == {
        "k": {
            "l": [[100, 1, {"id": "o1"}], [104, 1, {"id": "o2"}]],
            "r": [[105, 1, {"id": "p1"}]],
        }
    }
    j.executor.advance_watermark(10_000)
    assert j.commit() == {} and len(j.output.produced) == 2
