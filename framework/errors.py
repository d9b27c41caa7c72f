"""One taxonomy of what can go wrong, by what the runtime does about it.

As Kafka Streams' `TaskMigratedException` / `TaskCorruptedException` / `StreamsException`:
each kind names the reaction, so the code that catches it needs no case analysis.

- `ConfigurationError`: the user must change something; the CLI prints the message, one line
  that names the fix, and exits 1. Raised at start, never mid-run.
- `Retry`: the cluster could not be reached, or was between leaders or coordinators (a broker
  down or restarting); wait and run the same step again.
- `ServiceUnavailable`: a record cannot be read now because a service outside Kafka that it
  needs (the Schema Registry) does not answer; its partition waits at that record, retried
  with backoff, while the group membership and the other partitions go on.
- `Rejoin`: this membership of the consumer group cannot go on (partitions lost, producer
  fenced, a commit that cannot be aborted); close the clients and join again.
- `TaskCorrupted`: a task's local store contradicts the log (a checkpoint beyond the
  changelog's end); wipe that store and restore it from the changelog.
- `Fatal`: stop the process with the reason (`on_error="stop"` and unrecoverable errors).
- `UsageError`: code calling logwheel's API in a way that cannot be right (a hook producing to
  a stream it did not declare, a `Harness` driven backwards); the caller's code must change,
  and the message says how. Raised in a hook, it fails that call like any error of the hook.
- `BadRecord`: one record (or one hook call's output) cannot be processed; it goes to the
  dead-letter topic (or is skipped, by the computation's error policy) and the rest flows;
  `LateRecord`, one that came too late, follows the late policy instead; `FutureRecord` (a
  source record stamped beyond the skew allowance) and `ForgedRecord` (an internal record no
  logwheel writer could have written) are always dead-lettered, never stopped on;
  `TimedOut`, a record whose hook call ran past `hook_timeout_ms`, goes to the dead-letter
  topic at stage "timeout" by the error policy.
- `Abandoned` (a `BaseException`, so that no `except Exception` in a hook keeps it): the
  watchdog interrupted a call of the main thread that ran past its bound; the membership ends
  and the work starts again from the last commit.
"""

from __future__ import annotations


class LogwheelError(Exception):
    """Base of every error logwheel raises on purpose."""


class ConfigurationError(LogwheelError, ValueError):
    """Bad configuration; the message is one line that names the fix."""


class Retry(LogwheelError):
    """A passing failure to reach the cluster: wait, then run the same step again."""


class ServiceUnavailable(Retry):
    """A record needs a service that does not answer now (the Schema Registry, for a schema id
    not yet cached): not the record's fault, so never a dead letter; the runtime holds the
    record's partition at it and reads it again with backoff (framework/streaming/holds.py).
    `service` names the service (with its URL, never its credentials): one outage, one log
    line."""

    def __init__(self, service: str, reason: str) -> None:
        super().__init__(reason)
        self.service = service


class Rejoin(LogwheelError):
    """The current group membership cannot go on: leave, close the clients and rejoin."""


class TaskCorrupted(LogwheelError):
    """A task's local store cannot be trusted: wipe it and restore from the changelog."""

    def __init__(self, partition: int, why: str) -> None:
        super().__init__(f"task {partition}: {why}")
        self.partition = partition


class Fatal(LogwheelError):
    """Stop the process; the message says why."""


class UsageError(LogwheelError, ValueError):
    """A call into logwheel's API that cannot be right; the message names the fix. A
    `ValueError` too, as Python's own argument checks are."""


class BadRecord(LogwheelError):
    """A record, or what a hook made of it, that cannot go on; `stage` says where it failed
    ("decode", "key", "process_record", "encode", "state", "produce", ...) and `cause` is the
    underlying error when there is one."""

    def __init__(self, stage: str, reason: str, cause: BaseException | None = None) -> None:
        super().__init__(reason)
        self.stage = stage
        self.cause = cause


class LateRecord(BadRecord):
    """A record behind the input low watermark, for which nothing is open any more: counted in
    `logwheel_late_records_total` and dropped or dead-lettered at stage "late" by the
    computation's `on_late`, never stopped on."""

    def __init__(self, reason: str, closes: int | None = None) -> None:
        super().__init__("late", reason)
        self.closes = closes  # the lowest input watermark the record is late by, if known


class FutureRecord(BadRecord):
    """A source record stamped further ahead of wall time than its source's `max_future_ms`,
    under `on_future="dead_letter"`: dead-lettered at stage "future", never stopped on."""


class ForgedRecord(BadRecord):
    """An internal record (a watermark mark, a timer entry) that no logwheel writer could have
    written: no offsets for the partition it speaks for, offsets beyond the partition's end, a
    time beyond the skew allowance, or bytes that do not decode. Refused, never applied, and
    dead-lettered at stage "watermark" or "timers", never stopped on."""


class TimedOut(BadRecord):
    """A record (or timer) whose hook call ran past `hook_timeout_ms` and was abandoned
    (framework/streaming/watchdog.py): dead-lettered at stage "timeout" when the work, started
    again from the last commit, meets it — its hook is never called again."""

    def __init__(self, reason: str) -> None:
        super().__init__("timeout", reason)


class Abandoned(BaseException):
    """Raised in the main thread by the watchdog's signal: the call it was in ran past its
    bound (a hook past `hook_timeout_ms`, a client call that made no progress). A
    `BaseException`, like KeyboardInterrupt, so a hook's `except Exception` cannot keep it; the
    membership ends uncommitted and the runner joins again (its record, remembered, is
    dead-lettered as `TimedOut`)."""
