"""A sink's partitions and their tasks in one group membership, as the task manager is a
computation's: the rebalance callbacks only register what changed; in the loop, each assigned
partition is opened with the sink — which says where the target stands and fences the
partition's earlier owner — before anything of it is read, and read from there.

The target keeps the offsets: the group's are committed only so that `logwheel status` shows
the sink's lag (framework/streaming/sink_committer.py), and read only where the target has
none yet. A target that cannot be opened now is asked again with backoff. A revoked
partition's batch is written first (the membership commits before it gives partitions up); a
lost one's is dropped, to be read again by its next owner from the target's offset.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from framework.core.logs import RateLimited
from framework.core.watermarks import Unwatermarked
from framework.errors import ConfigurationError, Rejoin
from framework.kafka.groups import starts
from framework.kafka.output import PartIO
from framework.kafka.stream_codecs import stream_decoder
from framework.sinks.protocol import DEFAULT_BATCH, Sink
from framework.streaming.calls import Calls
from framework.streaming.holds import Holds, backoff
from framework.streaming.input_partition import InputPartition
from framework.streaming.sink_task import SinkTask

log = logging.getLogger(__name__)
TIMEOUT_S = 30


@dataclass
class _Opening:
    """An assigned partition not opened yet, and when to ask the sink again."""

    retries: int = 0
    until: float = 0.0  # monotonic seconds


class SinkTaskManager:
    """The tasks of one sink membership and the routes from partitions to them."""

    def __init__(
        self,
        io: PartIO,
        consumer: Consumer,
        holds: Holds,
        calls: Calls | None = None,
    ) -> None:
        self.io = io
        self.spec = io.spec
        self.sink: Sink = io.spec.sink
        # how many records one write takes at most: the sink's own `batch`, if it has one
        self.size = int(getattr(self.sink, "batch", DEFAULT_BATCH) or DEFAULT_BATCH)
        self.consumer = consumer
        self.holds = holds
        self.calls = Calls() if calls is None else calls
        self.clock = holds.clock  # opening is tried again as a hold is
        self.routes: dict[tuple[str, int], tuple[SinkTask, InputPartition]] = {}
        self.opening: dict[tuple[str, int], _Opening] = {}
        self.restoring: dict = {}  # a sink restores nothing
        self._warn = RateLimited(log)

    @property
    def tasks(self) -> dict[tuple[str, int], SinkTask]:
        """The running tasks, by the partition each reads."""
        return {key: task for key, (task, _) in self.routes.items()}

    @property
    def waiting(self) -> list[tuple[str, int]]:
        """The assigned partitions whose opening is due now."""
        now = self.clock()
        return [tp for tp, o in self.opening.items() if o.until <= now]

    # -- the rebalance callbacks ------------------------------------------------------------

    def assigned(self, tps: list[TopicPartition]) -> None:
        """New partitions, paused until they are opened (nothing slow happens here)."""
        self.consumer.assign(tps)
        self.consumer.pause(tps)
        self.opening.update({(tp.topic, tp.partition): _Opening() for tp in tps})

    def revoked(self, tps: list[TopicPartition]) -> None:
        """Partitions taken away (after the caller committed, unless they were lost)."""
        for tp in tps:
            key = (tp.topic, tp.partition)
            self.opening.pop(key, None)
            self.routes.pop(key, None)
        if tps:
            log.info("%s: gave up %d partition(s)", self.spec.group, len(tps))

    # -- in the loop ------------------------------------------------------------------------

    def step(self) -> None:
        """Open the partitions whose opening is due, and read each from where it stands."""
        opened = []
        for topic, partition in self.waiting:
            try:
                start = self.sink.open(topic, partition)
            except ConfigurationError:
                raise
            except Exception as error:  # noqa: BLE001 - the target away: asked again later
                self._later((topic, partition), error)
                continue
            where = "the group's offset" if start is None else start
            if start is None:  # the target has none yet: where the group stands
                tp = TopicPartition(topic, partition)
                start = starts(self.consumer, [tp], TIMEOUT_S)[(topic, partition)]
            del self.opening[(topic, partition)]
            self._run(topic, partition, start)
            opened.append(f"{topic}[{partition}] at {where}")
        if opened:
            log.info("%s: assigned %s", self.spec.group, ", ".join(opened))

    def _later(self, key: tuple[str, int], error: BaseException) -> None:
        opening = self.opening[key]
        wait = backoff(opening.retries)
        opening.retries += 1
        opening.until = self.clock() + wait
        self._warn.log(
            f"open|{key[0]}|{key[1]}",
            "%s: cannot open %s[%d] (retry in %.1f s): %s",
            self.spec.group, key[0], key[1], wait, error,
        )  # fmt: skip

    def _run(self, topic: str, partition: int, start: int) -> None:
        decode = stream_decoder(self.io.pipeline, topic, self.io.registry)
        inp = InputPartition(topic, partition, topic, decode, Unwatermarked(), [], position=start)
        task = SinkTask(self.io, inp, self.sink, self.size, self.holds, start, self.calls)
        self.routes[(topic, partition)] = (task, inp)
        tp = TopicPartition(topic, partition, start)
        try:
            self.consumer.seek(tp)
        except KafkaException as error:  # _STATE: the partition went with a fenced member
            raise Rejoin(f"seeking {topic}[{partition}] to {start}: {error}") from None
        self.consumer.resume([tp])

    def catch_up_positions(self) -> int:
        """Nothing to catch up: the target's offset, not the read position, is where a sink
        stands."""
        return 0

    def rewind(self) -> None:
        """Read every partition again from where its target stands (a sink's commit is the
        target's: it never aborts, so this only follows a call from the membership)."""
        tps = [TopicPartition(t, p) for t, p in self.routes]
        self.revoked(tps)
        self.consumer.pause(tps)
        self.opening.update({(tp.topic, tp.partition): _Opening() for tp in tps})

    def inputs(self) -> list[InputPartition]:
        return [inp for _, inp in self.routes.values()]

    def running(self) -> list[SinkTask]:
        return [task for task, _ in self.routes.values()]

    def close(self) -> None:
        """The tasks go, and the sink closes (each `open` starts afresh)."""
        self.routes.clear()
        self.opening.clear()
        try:
            self.sink.close()
        except Exception as error:  # noqa: BLE001 - a user's sink: log it and go on
            log.warning("%s: closing the sink: %s", self.spec.group, error)
