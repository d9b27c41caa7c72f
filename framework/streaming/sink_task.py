"""A sink's task: one input partition whose records are gathered into batches, each written by
the part's `Sink` together with the partition's next offset — the target's transaction is the
sink's commit (framework/sinks/protocol.py says what each call promises).

A batch is written when it is full, and at each commit of the membership (the input drained,
or the commit interval passed). Before a write, what the batch's records sent to the
dead-letter topic (those that could not be decoded) is acknowledged, so no write can leave a
record out that is not in the dead letters. A row the target refuses is dead-lettered with the
target's words and the batch written again without it; a target that does not answer holds
the partition — paused, its batch kept, tried again with the hold's backoff
(framework/streaming/holds.py), nothing skipped; a fenced write ends the membership (`Rejoin`).
"""

from __future__ import annotations

from confluent_kafka import Message

from framework.core.api import Record
from framework.errors import BadRecord, Fatal, Rejoin, ServiceUnavailable
from framework.kafka.output import PartIO
from framework.sinks.protocol import Fenced, Refused, Sink
from framework.sinks.stops import stop_at
from framework.streaming.calls import Calls
from framework.streaming.holds import Holds
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import Task


class RowRefused(BadRecord):
    """A row the sink's target refused; the message is the target's."""


class SinkTask(Task):
    """One input partition of a sink, read from where its target stands (`written`)."""

    def __init__(
        self,
        io: PartIO,
        inp: InputPartition,
        sink: Sink,
        size: int,
        holds: Holds,
        written: int,
        calls: Calls | None = None,
    ) -> None:
        super().__init__(io, calls)
        self.inputs = [inp]
        self.outputs = set()
        self.sink, self.size, self.holds = sink, size, holds
        self.batch: list[tuple[Message, Record]] = []
        self.written = written  # the target's next offset: where the partition stands
        self.failed = False  # the batch met a target that did not answer: written first

    @property
    def pending(self) -> bool:
        """Whether records were read past what the target holds."""
        return self.inputs[0].position > self.written

    def handle_run(self, msgs: list[Message], inp: InputPartition) -> None:
        """Gather a run of the partition's records; a full batch is written at once. A
        `ServiceUnavailable` raised here (the registry, met decoding; the target, met writing)
        leaves `inp.position` at the first record not taken, where the hold resumes it."""
        if self.failed:
            self._write()  # the batch it holds first, before anything is read on
        dead_letter, record, batch = self.io.output.dead_letter, inp.record, self.batch
        for msg in msgs:
            try:
                batch.append((msg, record(msg)))
            except BadRecord as bad:
                dead_letter(None, bad, bad.stage, msg)
            inp.consumed(msg)
            if len(batch) >= self.size:
                self._write()
                batch = self.batch

    def tick(self) -> int:
        """Something to write now (the membership commits): records read past the target's
        offset, on a partition not held."""
        return int(self.pending and not self.inputs[0].paused)

    def prepare_commit(self) -> None:
        """Write what is gathered (the membership commits); a target that does not answer
        holds the partition."""
        inp = self.inputs[0]
        if self.pending and not inp.paused:
            try:
                self._write()
            except ServiceUnavailable as error:
                self.holds.hold(inp, error)

    def _write(self) -> None:
        """Write the batch with the partition's next offset: the steps of the module's
        docstring. `ServiceUnavailable` if the target does not answer (the batch kept)."""
        inp = self.inputs[0]
        next_offset = inp.position
        self.io.collector.flush()  # its dead letters are on the broker before it leaves them out
        stop_at("before-transaction")
        while True:
            try:
                self.sink.write(inp.topic, inp.partition, [r for _, r in self.batch], next_offset)
            except Refused as refused:
                self._refused(refused)
                continue
            except Fenced as fenced:
                raise Rejoin(f"{self.io.spec.group}: fenced: {fenced}") from None
            except Exception as error:  # noqa: BLE001 - a sink's any other failure: hold
                self.failed = True
                target = f"the target of {self.io.spec.group}"
                raise ServiceUnavailable(target, str(error)) from None
            break
        stop_at("after-commit")
        self.batch, self.written, self.failed = [], next_offset, False
        self.holds.answered(inp)

    def _refused(self, refused: Refused) -> None:
        """Dead-letter the rows the target refused (acknowledged before the batch that leaves
        them out is written again) and take them out of the batch."""
        gone = {i for i, _ in refused.rows}
        if not gone or not gone <= set(range(len(self.batch))):
            raise Fatal(f"{self.io.spec.group}: the sink refused rows it was not given: {refused}")
        for i, why in refused.rows:
            msg, record = self.batch[i]
            self.io.output.dead_letter(record, RowRefused("write", why), "write", msg)
        self.io.collector.flush()
        self.batch = [entry for i, entry in enumerate(self.batch) if i not in gone]
