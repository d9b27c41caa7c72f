"""Named points in a sink's batch where a test can stop the process, to SIGKILL it exactly
there (or SIGCONT it later, as a zombie): `LOGWHEEL_SINK_STOP_AT=POINT[:N]` makes the process
SIGSTOP itself the Nth time (default the first) it reaches POINT, once. Unset, a check costs a
string comparison. The points, in a batch's order:

- `before-transaction`: the batch read and decoded, nothing of it sent to the target;
- `in-transaction`: the rows and the offset sent inside the target's open transaction, not
  committed (a sink calls `stop_at` there itself; `PostgresSink` does);
- `after-commit`: the target committed, nothing after it done (the group's offsets, the next
  poll).
"""

from __future__ import annotations

import os
import signal

from framework.errors import ConfigurationError

STOP_ENV = "LOGWHEEL_SINK_STOP_AT"
POINTS = ("before-transaction", "in-transaction", "after-commit")


def _parse(text: str) -> tuple[str, int] | None:
    if not text:
        return None
    point, _, nth = text.partition(":")
    if point not in POINTS or (nth and not (nth.isdecimal() and int(nth) >= 1)):
        raise ConfigurationError(
            f"{STOP_ENV}={text!r}: name one of {POINTS}, optionally ':N' (N >= 1)"
        )
    return point, int(nth or 1)


_wanted = _parse(os.environ.get(STOP_ENV, ""))
_reached = 0


def stop_at(point: str) -> None:
    """SIGSTOP this process if `point` is the one `LOGWHEEL_SINK_STOP_AT` names, reached for
    the Nth time; it goes on where it stopped if it is ever continued."""
    global _wanted, _reached
    if _wanted is None or _wanted[0] != point:
        return
    _reached += 1
    if _reached == _wanted[1]:
        _wanted = None
        os.kill(os.getpid(), signal.SIGSTOP)
