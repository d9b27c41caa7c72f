"""The contract between logwheel and a sink (README, "Sinks: exactly-once into a database").

A sink writes the records of one input partition in batches. Exactly-once holds because the
target keeps, in the same transaction as each batch, the partition's next offset: `open` reads
it back, and logwheel reads the partition from there. So a crash at any point neither loses
nor repeats a record, whatever the consumer group remembers.

The runtime's side of it, for every sink:

1. `open(topic, partition)` when the partition is assigned, before anything is read; it
   returns the next offset to read (None: the target has none; reading starts where the
   group stands, else at the earliest). An `open` also fences any earlier owner of the
   partition: from then on a `write` of theirs must fail with `Fenced`.
2. `write(topic, partition, records, next_offset)` for each batch, in offset order: the
   `records` (`framework.Record`s, possibly none when every record of the batch was
   dead-lettered) and the offset after the batch, made durable together or not at all.
   It raises
   - `Refused(rows)` when the target refuses some rows for what they hold (a type, a
     constraint): nothing of the batch is written; the runtime dead-letters those rows (with
     the target's message) and calls `write` again with the others and the same offset;
   - `Unavailable` when the target cannot be reached or written now: nothing is written;
     the runtime holds the partition and retries the same batch with backoff, skipping
     nothing;
   - `Fenced` when the partition was opened by another owner since this one's `open`:
     nothing is written; the runtime leaves the group and joins again.
   Any other exception is treated as `Unavailable`.
3. `close()` when the process stops or its partitions go (each `open` starts afresh).

A sink may also define `start(name)`, called once before the first `open` with the sink's
name as declared (`pipeline.sink(name, ...)`: e.g. its key in an offsets table), and an int
`batch` attribute: how many records a write takes at most (default `DEFAULT_BATCH`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from framework.core.api import Record
from framework.errors import LogwheelError

DEFAULT_BATCH = 1000


@runtime_checkable
class Sink(Protocol):
    """What `pipeline.sink(..., sink=...)` takes: see the module's docstring."""

    def open(self, topic: str, partition: int) -> int | None: ...

    def write(
        self, topic: str, partition: int, records: Sequence[Record], next_offset: int
    ) -> None: ...

    def close(self) -> None: ...


class SinkError(LogwheelError):
    """What a sink's `write` (or `open`) raises to tell the runtime what to do."""


class Refused(SinkError):
    """The target refused rows for what they hold: `rows` are (index in the batch, the
    target's message); nothing of the batch was written."""

    def __init__(self, rows: Sequence[tuple[int, str]]) -> None:
        self.rows = list(rows)
        super().__init__(f"{len(self.rows)} row(s) refused: {self.rows[0][1] if self.rows else ''}")


class Unavailable(SinkError):
    """The target cannot be reached or written now; nothing was written: retry later."""


class Fenced(SinkError):
    """Another owner opened the partition since this one did; nothing was written."""
