"""Stand-ins for an admin client's offset and metadata requests, answering from a script."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace


class Answers:
    """An admin client's list_offsets, answering from a script (one offset per call), and
    its list_topics (a metadata request), counted."""

    def __init__(self, *offsets: int) -> None:
        self.offsets = list(offsets)
        self.calls = 0
        self.refreshed = 0
        self.waits: list[float] = []

    def list_offsets(self, request, request_timeout, **_):
        self.calls += 1
        self.waits.append(request_timeout)
        offset = self.offsets.pop(0)
        answers = {}
        for tp in request:
            future: Future = Future()
            future.set_result(SimpleNamespace(offset=offset))
            answers[tp] = future
        return answers

    def list_topics(self, topic, timeout):
        self.refreshed += 1


class MovedLeader(Answers):
    """An admin client that knew a partition's leader before its broker was killed: no end
    (-1001, each question waiting out its timeout on the dead broker) until its metadata is
    fetched again after the leader moved (the `moved_after`th fetch)."""

    def __init__(self, end: int, moved_after: int) -> None:
        super().__init__()
        self.end, self.moved_after = end, moved_after

    def list_offsets(self, request, request_timeout, **_):
        moved = self.refreshed >= self.moved_after
        self.offsets = [self.end if moved else -1001]
        return super().list_offsets(request, request_timeout)
