"""The keyed context on its own: what a hook sees of one key, and a hook call that is atomic —
its state, timers and productions kept together when it returns, undone together when it
fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from framework.core.api import Timer
from framework.core.context import KeyedContext, production_id
from framework.core.keyed_state import KeyedState, MemoryStateBackend
from framework.core.timers import TimerService
from framework.errors import BadRecord, UsageError
from framework.serde.json_codec import decode_json, encode_json


class Output:
    """Productions as (stream, key, value, timestamp, id); `refuse` fails a value's encoding."""

    def __init__(self) -> None:
        self.produced: list[tuple] = []

    def encode(self, stream, key, value, timestamp, record_id):
        if value == "refuse":
            raise BadRecord("encode", "refused")
        return (stream, key, value, timestamp, record_id)

    def produce_all(self, encoded):
        self.produced += encoded


def _context(tables=None):
    states = KeyedState(MemoryStateBackend(), encode_json, decode_json)
    timers, output = TimerService(), Output()
    scope = SimpleNamespace(input_watermark=42, clock=lambda: 7)
    ctx = KeyedContext(scope, states, timers, output, "p.c", frozenset({"out"}), tables)
    ctx._bind("ann", 1_000, "in/0/5")
    return ctx, states, timers, output


def test_produce_defaults_to_the_key_and_the_inputs_time_with_a_deterministic_id():
    ctx, _, _, output = _context()
    ctx.produce("out", {"n": 1})
    ctx.produce("out", {"n": 2}, key="bob", timestamp=5)
    assert output.produced == []  # nothing leaves before the call returns
    ctx._finish()
    assert output.produced == [
        ("out", "ann", {"n": 1}, 1_000, production_id("p.c", "in/0/5", 0)),
        ("out", "bob", {"n": 2}, 5, production_id("p.c", "in/0/5", 1)),
    ]
    assert (ctx.low_watermark, ctx.processing_time) == (42, 7)


def test_a_failed_call_leaves_state_timers_and_outputs_as_they_were():
    ctx, states, timers, output = _context()
    ctx.state["n"] = 1
    ctx.set_timer("close", 60)
    ctx._finish()
    ctx._bind("ann", 2_000, "in/0/6")
    ctx.state["n"] = 2
    ctx.set_timer("close", 90)
    ctx.set_timer("other", 5, "processing")
    ctx.produce("out", "fine")
    ctx._abort()
    assert states.get("ann") == {"n": 1}
    assert timers.get("ann", "close") == Timer(60, "close", "event")
    assert timers.get("ann", "other") is None
    assert output.produced == []


def test_a_refused_production_fails_the_call_even_if_the_hook_caught_it():
    ctx, _, _, output = _context()
    with pytest.raises(BadRecord):
        ctx.produce("out", "refuse")
    ctx.produce("out", "fine")
    with pytest.raises(BadRecord):
        ctx._finish()
    assert output.produced == []


@pytest.mark.parametrize(
    ("call", "error", "fix"),
    [
        (lambda c: c.produce("nope", 1), UsageError, r"add it to outputs=\{\.\.\.\}"),
        (lambda c: c.produce("out", 1, key=3), TypeError, "must be a str"),
        (lambda c: c.set_timer("t", 1, "sometime"), UsageError, "use 'event' or 'processing'"),
        (lambda c: c.set_timer("t", 1.5), TypeError, "int milliseconds"),
        (lambda c: c.table("users"), UsageError, r"add it to tables=\{\.\.\.\}"),
    ],
)
def test_a_misuse_names_the_fix(call, error, fix):
    ctx, *_ = _context()
    with pytest.raises(error, match=fix):
        call(ctx)


def test_tables_are_read_as_declared():
    ctx, *_ = _context(tables={"users": {"ann": {"age": 3}}})
    assert ctx.table("users")["ann"] == {"age": 3}
