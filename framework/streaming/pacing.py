"""A task's inputs read in step by event time, as Kafka Streams' PartitionGroup picks the
record with the lowest timestamp among a task's partitions (and Flink aligns its sources'
watermarks).

A computation of two inputs whose backlogs the consumer fetches one after the other would
otherwise run one input far ahead of the other: a join's state would hold every record of the
input read first until the other's watermark caught up (a hot key's state growing with the
backlog), and a window would see one side of each span long before the other. So a keyed
task of more than one input takes what is fetched for it into each partition's `parked`
records, and hands on, a run at a time, the parked records of the partition whose next record
is the earliest, up to `DRIFT_MS` past the next record of every other input that has records
waiting. An input with records still to fetch but none parked (its log goes on past what was
read: `unread`) holds the others back to `DRIFT_MS` past the largest timestamp it handled, for
at most `WAIT_S` (then the task goes on without it, as Kafka Streams does past
max.task.idle.ms). A partition with `PARKED_MAX` records parked stops fetching until half of
them are handled (Kafka Streams' buffered.records.per.partition).

Positions move only with what a task handled, so a commit never covers a parked record, and a
rewind or a rebalance, which rebuilds the routes, drops them with their partitions to be read
again. Tasks of one input, repartitioning tasks and replayed dead letters are not paced.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, Message, TopicPartition

from framework.streaming.fetched_runs import partition_runs
from framework.streaming.holds import Holds
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import KeyedTask, Task

DRIFT_MS = 1_000
"""How far past another input's next record a task may handle one: enough that a run is a
batch, not a record; small beside any window."""

WAIT_S = 2.0
"""How long a task waits for an input that has records to fetch and none fetched."""

PARKED_MAX = 1_000
"""Records parked per partition before its fetching pauses."""

Routes = Mapping[tuple[str, int], tuple[Task, InputPartition]]


def unread(consumer: Consumer, inp: InputPartition) -> bool:
    """Whether `inp` has records its task has not handled yet: parked ones, or its log goes on
    past the consumer's position (records of a transaction still open count: they may be
    old). The end is the one the last fetch saw; unknown, nothing is taken as unread."""
    if inp.parked or inp.throttled:
        return True
    tp = TopicPartition(inp.topic, inp.partition)
    _, end = consumer.get_watermark_offsets(tp, cached=True)
    if end < 0:
        return False
    position = consumer.position([tp])[0].offset  # past transaction markers, unlike inp's
    return (position if position >= 0 else inp.position) < end


def _time(msg: Message) -> int:
    return msg.timestamp()[1]


class Pacer:
    """Routes fetched records to their tasks, pacing those of more than one input."""

    def __init__(
        self, consumer: Consumer, holds: Holds, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.consumer = consumer
        self.holds = holds
        self.clock = clock
        self._pending: dict[Task, None] = {}  # the tasks with parked records, in order
        # since when each task has waited for an input with nothing fetched
        self._since: weakref.WeakKeyDictionary[Task, float] = weakref.WeakKeyDictionary()

    @property
    def pending(self) -> bool:
        """Whether parked records wait (the loop polls without a long wait meanwhile)."""
        return bool(self._pending)

    def route(self, msgs: list[Message], routes: Routes) -> int:
        """Hand each run of a partition's records to its task, or park it (a paced task's),
        then hand on what the parked records of every paced task allow; returns how many
        parked records were handed on. Records before their partition's position are passed
        over: the consumer may still hand on what it fetched before a seek to the position (a
        sink's partition starts where the group stood, then seeks to where its target stands),
        and the task has them already."""
        holds = self.holds
        for topic, partition, run in partition_runs(msgs):
            route = routes.get((topic, partition))
            if route is None or route[1].paused:
                continue  # a held partition's records are read again after its resume
            task, inp = route
            if run[0].offset() < inp.position:
                run = [m for m in run if m.offset() >= inp.position]
                if not run:
                    continue
            if not _paced(task, inp):
                holds.run(task, inp, run)
            elif not inp.throttled:  # else: fetched again from past the parked ones
                inp.parked += run
                self._pending.setdefault(task, None)
                if len(inp.parked) >= PARKED_MAX:
                    self._throttle(inp)
        return self.step(routes) if self._pending else 0

    def step(self, routes: Routes) -> int:
        """Hand on what the parked records of each paced task allow now; returns how many."""
        handed = 0
        for task in list(self._pending):
            inputs = [i for i in task.inputs if routes.get((i.topic, i.partition), (0, 0))[1] is i]
            if len(inputs) < len(task.inputs) and not any(i.parked for i in inputs):
                del self._pending[task]  # revoked or rebuilt: its records are read again
                continue
            handed += self._drain(task, inputs)
            for inp in inputs:
                if inp.throttled and len(inp.parked) <= PARKED_MAX // 2:
                    self._unthrottle(inp)
            if not any(i.parked for i in inputs):
                del self._pending[task]
        return handed

    def release(self, routes: Routes) -> list[Message]:
        """Every parked record, in each partition's order, un-parked (for the search of a
        refused record, which runs records one at a time): their partitions resume."""
        out: list[Message] = []
        for task in self._pending:
            for inp in task.inputs:
                out += inp.parked
                inp.parked = []
                if inp.throttled and routes.get((inp.topic, inp.partition)):
                    self._unthrottle(inp)
        self._pending.clear()
        return out

    def _drain(self, task: Task, inputs: list[InputPartition]) -> int:
        handed = 0
        while True:
            ready = [i for i in inputs if i.parked and not i.paused]
            if not ready:
                return handed
            first = min(ready, key=lambda i: _time(i.parked[0]))
            head = _time(first.parked[0])
            limit = self._limit(task, first, head, inputs)
            if limit is None:
                return handed  # waiting for an input with nothing fetched
            parked, n, top = first.parked, 1, head
            while n < len(parked):
                t = _time(parked[n])
                if t > limit:
                    break
                top = max(top, t)
                n += 1
            run = parked[:n]
            del parked[:n]
            self.holds.run(task, first, run)
            handed += n
            if first.front is None or top > first.front:
                first.front = top

    def _limit(
        self, task: Task, first: InputPartition, head: int, inputs: list[InputPartition]
    ) -> float | None:
        """Up to which timestamp `first` may be handled, its next record being at `head`
        (inf: no other input bounds it); None while an input it waits for has nothing
        fetched."""
        limit, waited_out = math.inf, False
        for other in inputs:
            if other is first:
                continue
            if other.parked:
                bound = _time(other.parked[0])
            elif unread(self.consumer, other):
                bound = other.front
                if bound is None or bound + DRIFT_MS < head:
                    now = self.clock()
                    since = self._since.setdefault(task, now)
                    if now - since < WAIT_S:
                        return None
                    waited_out = True  # until it has records fetched, or none to fetch
                    continue
            else:
                continue
            limit = min(limit, bound + DRIFT_MS)
        if not waited_out:
            self._since.pop(task, None)
        return limit

    def _throttle(self, inp: InputPartition) -> None:
        """Stop fetching `inp` past its parked records until half of them are handled."""
        inp.throttled = True
        tp = TopicPartition(inp.topic, inp.partition, inp.parked[-1].offset() + 1)
        self.consumer.pause([tp])
        self.consumer.seek(tp)  # what was fetched past the parked records is fetched again

    def _unthrottle(self, inp: InputPartition) -> None:
        """Fetch `inp` again, unless a hold (streaming/holds.py) keeps it paused."""
        inp.throttled = False
        if not inp.paused:
            self.consumer.resume([TopicPartition(inp.topic, inp.partition)])


def _paced(task: Task, inp: InputPartition) -> bool:
    return isinstance(task, KeyedTask) and len(task.inputs) > 1 and inp is not task.replays
