from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from framework.kafka.errors import Unreachable
from framework.kafka.reading import end_offsets


class Answers:
    """An admin client's list_offsets, answering from a script (one offset per call)."""

    def __init__(self, *offsets: int) -> None:
        self.offsets = list(offsets)
        self.calls = 0

    def list_offsets(self, request, **_):
        self.calls += 1
        offset = self.offsets.pop(0)
        answers = {}
        for tp in request:
            future: Future = Future()
            future.set_result(SimpleNamespace(offset=offset))
            answers[tp] = future
        return answers


def test_an_end_the_broker_cannot_say_yet_is_asked_again_never_returned():
    admin = Answers(-1001, -1001, 253)  # a broker restarting answers OFFSET_INVALID meanwhile
    assert end_offsets(admin, [("s", 0)], committed=False) == {("s", 0): 253}
    assert admin.calls == 3


def test_an_end_that_stays_unknown_is_a_cluster_out_of_reach():
    with pytest.raises(Unreachable, match="no end offset yet"):
        end_offsets(Answers(*[-1001] * 100), [("s", 0)], committed=False, timeout=0.3)
