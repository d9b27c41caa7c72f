"""A broker's incarnations as a controller that outlives them sees them: the controller fences
an incarnation one session after its last heartbeat, and what the broker does around that fence
decides whether transactions complete.

Two rules follow (both for a separated broker, whose controller runs in a JVM of its own; the
first also for a node of a cluster, whose other nodes' controllers outlive it):

- a new incarnation starts only once the previous one is fenced (`Fencing.await_fence`);
- a stopping incarnation is killed before its fence can land (`Fencing.stop_timeout`).

When the previous incarnation was last alive is kept in the home's `broker.down`, written when
our stop or kill ended it (`went_down`) and removed when the next one starts (`came_up`).
"""

from __future__ import annotations

import time
from pathlib import Path

from framework.broker.roles import Role
from framework.broker.settings import (
    FENCE_MARGIN_S,
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    STOP_MARGIN_S,
    STOP_TIMEOUT_S,
)
from framework.jvm.process import accepts, read_number
from framework.jvm.service import Say


class Fencing:
    """The fencing of the broker `role` of `home`, run with the broker properties `settings`
    (its session and heartbeat interval, if they set them)."""

    def __init__(self, home: Path, role: Role, settings: dict[str, str]) -> None:
        self.role = role
        self.settings = settings
        self.down_file = home / "broker.down"

    def went_down(self) -> None:
        """Our stop or kill ended the broker now: its session counts from now."""
        self.down_file.write_text(f"{time.time():.3f}\n")

    def came_up(self) -> None:
        """A new incarnation runs: when it ends is not known until it does."""
        self.down_file.unlink(missing_ok=True)

    def stop_timeout(self, timeout: float = STOP_TIMEOUT_S) -> float:
        """How long a separated broker's JVM may take to stop after SIGTERM before it is
        killed.

        Its controller fences it one session after its last heartbeat, and a shutdown may
        outlast that: in the seeded chaos run the fence came 2.1 s after the SIGTERM (a 2 s
        session) and the JVM ran 5.5 s more, its transaction coordinator sending markers while
        its single-replica partitions had no leader. Kafka 4.3 skips markers to a partition
        without a leader (KAFKA-20734, `TIMED_OUT_ABORT_SCAN_MS`): the transaction hung for
        good. So its JVM gets until just before the earliest fence (the session, less one
        heartbeat interval and a margin), `timeout` at most."""
        session = int(self.settings.get("broker.session.timeout.ms", SESSION_TIMEOUT_MS))
        beat = int(self.settings.get("broker.heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS))
        return min(timeout, max(STOP_MARGIN_S, (session - beat) / 1000 - STOP_MARGIN_S))

    def await_fence(self, fresh: int | None, timeout: float, say: Say) -> None:
        """Return once the controller has fenced the broker's previous incarnation (its
        session expired), so that the new incarnation's first view of the cluster shows
        itself fenced and leading nothing.

        Until then the controller refuses the new incarnation's registration, but the broker
        already acts on the metadata it caught up to: it leads every partition again, its
        transaction coordinator loads and sends the markers of transactions it finds half
        completed, and when the fence lands those partitions have no leader until the
        controller elects the new incarnation: Kafka skips markers to a partition without a
        leader and records the transaction complete (`TIMED_OUT_ABORT_SCAN_MS`). The previous
        incarnation was last alive when our `stop` or `kill` ended it (`broker.down`), or, if
        it ended otherwise, up to now. A controller that starts gives every broker it knows a
        fresh session: `fresh` is the port of a controller started just now, and the session
        counts from when it answers there (waited for up to `timeout` s)."""
        if not self.role.formatted:
            return  # never registered
        down = read_number(self.down_file, float)
        alive = time.time() if down is None else down
        if fresh is not None:
            deadline = time.monotonic() + timeout
            while not accepts(fresh) and time.monotonic() < deadline:
                time.sleep(0.1)
            alive = time.time()
        session = int(self.settings.get("broker.session.timeout.ms", SESSION_TIMEOUT_MS)) / 1000
        wait = alive + session + FENCE_MARGIN_S - time.time()
        if wait > 0:
            say(f"waiting {wait:.1f}s for the controller to fence the broker's last incarnation")
            time.sleep(wait)
