"""What happens to a bad record: the computation's error policy, in one place for every runtime.

As Kafka Streams' deserialization and production exception handlers, per computation:
`on_error="dead_letter"` (default) writes it to `<pipeline>.<computation>.dlq` with its reason,
`"skip"` drops it, `"stop"` ends the process with the reason. Every bad record is counted in
`logwheel_dead_letters_total` by stage and reason class, whatever the policy.
"""

from __future__ import annotations

import logging

from framework.core.logs import RateLimited
from framework.core.metrics import DEAD_LETTERS, UNDECODABLE
from framework.errors import BadRecord, Fatal, ForgedRecord, FutureRecord, LateRecord

log = logging.getLogger(__name__)

_undecodable = RateLimited(log)


def undecodable(topic: str, error: BaseException) -> None:
    """An internal record (watermark mark, timer entry) that cannot be decoded: skipped and
    counted, never a crash; one warning per topic a minute."""
    UNDECODABLE.labels(topic).inc()
    _undecodable.log(topic, "skipping an undecodable record of %s: %s", topic, error)


def reason_of(error: BaseException) -> str:
    """The `logwheel.error` text: the error's type and message."""
    if isinstance(error, BadRecord):
        cause = error.cause
        kind = type(cause if cause is not None else error).__name__
        return f"{kind}: {error}"
    return f"{type(error).__name__}: {error}"


def reason_class(error: BaseException) -> str:
    if isinstance(error, BadRecord) and error.cause is not None:
        return type(error.cause).__name__
    return type(error).__name__


class ErrorPolicy:
    """Counts a bad record and says whether to write it to the dead-letter topic; raises
    `Fatal` under `on_error="stop"`. Logs one line per stage and reason class a minute, with
    how many came since the last."""

    def __init__(self, computation: str, policy: str) -> None:
        self.computation = computation
        self.policy = policy
        self.bad_records = 0  # met under this policy, whatever became of them
        self._log = RateLimited(log)

    def admit(self, stage: str, error: BaseException) -> bool:
        kind = reason_class(error)
        self.bad_records += 1
        DEAD_LETTERS.labels(self.computation, stage, kind).inc()
        if isinstance(error, LateRecord | FutureRecord | ForgedRecord):
            # on_late / on_future="dead_letter" chose already; neither lateness, a skewed clock
            # nor a forged internal record (anyone's to write) ever stops a job
            return True
        if self.policy == "stop":
            raise Fatal(
                f"{self.computation}: a record failed at stage {stage!r} ({reason_of(error)}) "
                "and on_error='stop': fix the input or the hook, or use on_error='dead_letter'"
            )
        what = "dead-lettered" if self.policy == "dead_letter" else "skipped"
        self._log.log(
            f"{stage}|{kind}",
            "%s: %s a record at %s: %s",
            self.computation,
            what,
            stage,
            reason_of(error),
        )
        return self.policy == "dead_letter"
