"""Input partitions held at a record that needs a service that does not answer (the Schema
Registry, for a schema id not yet cached: no connection, a timeout, 5xx, 429), as Kafka Streams
pauses a partition whose records it cannot take yet. An answer about the record itself (the
registry has no such id, or refuses it to this job) is no reason to wait: that record is a
dead letter (framework/kafka/schema_registry.py), and the partition goes on.

A `ServiceUnavailable` raised while a task handles a run of records leaves the partition's
position at the first record not handled. The partition is then paused and its fetch position
moved back to that record: the consumer goes on polling (the group membership stays healthy,
no `max.poll.interval.ms` breach, no rejoin), the other partitions flow, and the commit covers
only what was handled. After a backoff (0.5 s, doubling, at most 30 s) the partition resumes
and the record is read again; it fails again while the service is away, and goes on once it
answers. Nothing is skipped, dead-lettered or done twice.

While held, the partition's watermark stays where it was: a live source's partition that
waits at a record is not silent, and its records must not come late when it resumes.

One outage of a service is logged once when it begins (with the service's URL) and once when
it ends; `logwheel_held_partitions` and `logwheel_hold_retries_total` count it meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, TopicPartition

from framework.core.metrics import HELD_PARTITIONS, HOLD_RETRIES
from framework.core.pipeline import ComputationSpec
from framework.errors import ServiceUnavailable
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import Task

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.5
"""How long a held partition waits before its first retry."""

BACKOFF_MAX_S = 30.0
"""The longest wait between two retries of a held partition."""

Routes = Mapping[tuple[str, int], tuple[Task, InputPartition]]


def backoff(retries: int) -> float:
    """Seconds to wait before the retry that follows `retries` failed ones."""
    return min(BACKOFF_FIRST_S * 2 ** min(retries, 16), BACKOFF_MAX_S)


@dataclass
class _Hold:
    inp: InputPartition  # the route's input when held: a rebuilt route is a new one
    offset: int  # the position held at; the hold ends once the input reads past it
    service: str
    retries: int
    until: float  # when the partition resumes (monotonic seconds)


@dataclass
class _Outage:
    since: float
    retries: int = 0


class Holds:
    """The held partitions of one group membership, and the outages that hold them."""

    def __init__(
        self,
        spec: ComputationSpec,
        consumer: Consumer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.group = spec.group  # what the log lines start with
        self.consumer = consumer
        self.clock = clock
        self._holds: dict[tuple[str, int], _Hold] = {}
        self._outages: dict[str, _Outage] = {}
        self._held_metric = HELD_PARTITIONS.labels(spec.name)
        self._retries_metric = HOLD_RETRIES.labels(spec.name)
        self._held_metric.set(0)  # a new membership holds nothing yet

    def __contains__(self, key: tuple[str, int]) -> bool:
        """Whether a partition is held, or resumed and not yet past its record."""
        return key in self._holds

    def run(self, task: Task, inp: InputPartition, msgs: list[Message]) -> None:
        """`task.handle_run(msgs, inp)`, holding the partition at the first record that needs
        a service that does not answer."""
        try:
            task.handle_run(msgs, inp)
        except ServiceUnavailable as error:
            self.hold(inp, error)

    def hold(self, inp: InputPartition, error: ServiceUnavailable) -> None:
        """Pause `inp`'s partition at its position (the first record not handled) until its
        next retry."""
        key, now = (inp.topic, inp.partition), self.clock()
        tp = TopicPartition(inp.topic, inp.partition, inp.position)
        self.consumer.pause([tp])
        # What was fetched beyond it is read again after the resume; until then the consumer's
        # position is unknown (-1001), so the idle catch-up of positions leaves it alone.
        self.consumer.seek(tp)
        inp.parked.clear()  # read again too: the hold owns the pause now
        inp.throttled = False
        previous = self._holds.get(key)
        retries = previous.retries + 1 if previous and previous.inp is inp else 0
        if not inp.paused and inp.frozen is None:
            watermark, _ = inp.watermark.value()
            inp.frozen = (watermark, False)
        inp.paused = True
        wait = backoff(retries)
        self._holds[key] = _Hold(inp, inp.position, error.service, retries, now + wait)
        self._retries_metric.inc()
        self._held_metric.set(len(self._holds))
        outage = self._outages.get(error.service)
        if outage is None:
            self._outages[error.service] = _Outage(now)
            log.warning(
                "%s: %s; holding %s[%d] at offset %d and retrying with backoff "
                "(%.1f s, doubling up to %.0f s): no record is skipped",
                self.group,
                error,
                inp.topic,
                inp.partition,
                inp.position,
                BACKOFF_FIRST_S,
                BACKOFF_MAX_S,
            )
        else:
            outage.retries += 1
            log.debug(
                "%s: %s[%d] still held, retry in %.1f s",
                self.group,
                inp.topic,
                inp.partition,
                wait,
            )

    def answered(self, inp: InputPartition) -> None:
        """The service `inp` waits for answered (a sink's target took the batch it held): its
        hold, if it has one, ends now, whether or not it has read on."""
        key = (inp.topic, inp.partition)
        hold = self._holds.get(key)
        if hold is None or hold.inp is not inp:
            return
        del self._holds[key]
        inp.frozen = None
        self._held_metric.set(len(self._holds))
        self._end(hold.service, self.clock(), answered=True)

    def step(self, routes: Routes) -> None:
        """Resume the held partitions whose wait is over; end the holds whose partition read
        past its record (the service answers again) or is no longer this membership's."""
        if not self._holds:
            return
        now = self.clock()
        for key, hold in list(self._holds.items()):
            inp = hold.inp
            route = routes.get(key)
            if route is None or route[1] is not inp:  # revoked, or rebuilt after an abort
                del self._holds[key]
                self._end(hold.service, now, answered=False)
            elif inp.position > hold.offset:
                del self._holds[key]
                inp.frozen = None
                self._end(hold.service, now, answered=True)
            elif inp.paused and now >= hold.until:
                inp.paused = False
                self.consumer.resume([TopicPartition(inp.topic, inp.partition)])
        self._held_metric.set(len(self._holds))

    def _end(self, service: str, now: float, answered: bool) -> None:
        if any(h.service == service for h in self._holds.values()):
            return
        outage = self._outages.pop(service, None)
        if outage is not None and answered:
            log.info(
                "%s: %s answers again after %.1f s (%d retries); held partitions go on",
                self.group,
                service,
                now - outage.since,
                outage.retries,
            )
