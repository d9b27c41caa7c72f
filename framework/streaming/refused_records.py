"""Finding the one input record whose output the broker refuses for its content, so that it
goes to the dead-letter topic and the rest of the input flows (invariant 7).

A refused commit is aborted and re-run. First the topics' limits are read again (they may
have changed since the start): the checks before producing then catch the offending hook
call. If it happens again, records are re-run one per commit until the one whose commit is
refused is found; it is dead-lettered from then on. Records whose hook call the watchdog
abandoned (framework/streaming/hung_calls.py) are isolated the same way, at stage "timeout".
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, Message
from confluent_kafka.admin import AdminClient

from framework.errors import BadRecord
from framework.kafka.collector import Collector
from framework.kafka.errors import group_event
from framework.kafka.limits import read_limits
from framework.kafka.output import PartIO
from framework.streaming.holds import Holds
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import Task

log = logging.getLogger(__name__)
Routes = dict[tuple[str, int], tuple[Task, InputPartition]]


class RefusedRecords:
    """The search for a record whose output the broker refuses, in one membership."""

    def __init__(self, io: PartIO, admin: AdminClient) -> None:
        self.io = io
        self.collector: Collector = io.collector
        self.admin = admin
        self.refusals = 0  # consecutive commits the broker refused for a record's content
        self.searching = False  # one input record per commit, to find the one refused
        self.handled: list[tuple[str, int, int]] = []  # input records since the last commit

    @property
    def active(self) -> bool:
        """Whether records go through `handle` (one at a time) instead of in runs."""
        return self.searching or bool(self.collector.poisoned)

    def isolating(self, routes: Routes) -> bool:
        """`active` for a membership reading `routes`: a record found bad in a partition read
        elsewhere (another process owns it now) slows nothing here."""
        poisoned = self.collector.poisoned
        return self.searching or (bool(poisoned) and any((t, p) in routes for t, p, _ in poisoned))

    def passed(self, positions: dict[tuple[str, int], int]) -> None:
        """Forget the records found bad below their partition's committed position: their
        dead letters committed, or another process went past them."""
        poisoned = self.collector.poisoned
        for t, p, o in [k for k in poisoned if k[2] < positions.get(k[:2], -1)]:
            del poisoned[t, p, o]

    def handle(self, msgs: list[Message], routes: Routes, holds: Holds) -> None:
        """Each record's position is kept, and one found refused (or abandoned) is
        dead-lettered at its stage instead of run (one held for a service that does not
        answer is read again later)."""
        poisoned = self.collector.poisoned
        for msg in msgs:
            err = msg.error()
            if err is not None:
                group_event(err)
                continue
            route = routes.get((msg.topic(), msg.partition()))
            if route is None or route[1].paused:
                continue
            position = (msg.topic(), msg.partition(), msg.offset())
            self.handled.append(position)
            if position in poisoned:
                error = poisoned[position]
                self.io.output.dead_letter(None, error, error.stage, msg)
                route[1].consumed(msg)
            else:
                holds.run(route[0], route[1], [msg])

    def committed(self, ok: bool, refusal: KafkaError | None) -> None:
        """What the commit of the records handled since the last one came to."""
        handled, self.handled = self.handled, []
        if ok:
            self.refusals = 0
            self.searching = self.searching and bool(handled)
            for position in handled:  # dead letters committed: the records read on, in runs
                self.collector.poisoned.pop(position, None)
        elif refusal is not None:
            self._refused(handled, f"the broker refused its output: {refusal.str()}")

    def _refused(self, handled: list[tuple[str, int, int]], reason: str) -> None:
        group = self.io.spec.group
        self.refusals += 1
        if self.searching and len(handled) == 1:
            self.collector.poisoned[handled[0]] = BadRecord("produce", reason)
            log.warning("%s: found the refused record at %s: %s", group, handled[0], reason)
        elif self.refusals == 1:
            limits = self.collector.limits
            self.collector.limits = read_limits(
                self.admin, limits.limits, limits.producer_max_bytes
            )
        else:
            self.searching = True
            log.warning("%s: %s; re-running one record per commit", group, reason)
