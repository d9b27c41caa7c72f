"""The life of one `logwheel run` process for one part of a pipeline (a computation, a sink):
its state directory held, its topics made, then memberships of its group joined one after
another (each running the loop: framework/streaming/membership.py, wired for the part's runtime
by framework/streaming/wiring.py) until the process stops, with the memory an ended one leaves
behind given back — watched throughout by the process's watchdog
(framework/streaming/watchdog.py), whose abandoned calls end a membership as a `Rejoin` does.
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from framework.core.pipeline import Pipeline
from framework.errors import Abandoned, Rejoin, Retry
from framework.kafka.errors import reaching_kafka
from framework.kafka.registry_settings import RegistrySettings
from framework.query.server import QueryServer
from framework.streaming.heap import trim_heap
from framework.streaming.membership import DEFAULT_COMMIT_INTERVAL_MS, Membership, Pace
from framework.streaming.state_dir import instance_id, lock_state_dir
from framework.streaming.watchdog import Watchdog, start_watchdog
from framework.streaming.wiring import Settings, Watch, describe_timeout, wiring_for

log = logging.getLogger(__name__)
T = TypeVar("T")


class Runner:
    """Runs one part of a pipeline until `stop` is set."""

    def __init__(
        self,
        pipeline: Pipeline,
        part: str,
        *,
        bootstrap: str,
        state_dir: Path,
        kafka: dict | None = None,
        registry: RegistrySettings | None = None,
        instance_id: str | None = None,
        standby: int = 0,
        commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
        max_batch: int = 1000,
        idle_poll_s: float = 0.02,
        owns_process: bool = False,
        server: QueryServer | None = None,
    ) -> None:
        """`owns_process`: this runner is its process (`logwheel run`), whose main thread it
        runs in; its watchdog may interrupt that thread and start the process again. `standby`:
        warm replicas of that many other instances' partitions, for a part that keeps state.
        `server` answers queries of a queryable part's state (`--serve`) from the replicas it
        holds."""
        self.pipeline = pipeline
        self.spec = pipeline.part(part)
        self.dir = Path(state_dir) / pipeline.name / part
        pace = Pace(commit_interval_ms / 1000, max_batch, idle_poll_s)
        settings = Settings(bootstrap, dict(kafka or {}), registry, self.dir, standby, pace)
        self.wiring = wiring_for(pipeline, self.spec, settings)
        self.instance_id = instance_id
        self.standby = standby
        self.owns_process = owns_process
        self.watchdog: Watchdog | None = None
        self.server = server

    def run(self, stop: threading.Event) -> None:
        self.pipeline.validate()
        self.wiring.check()
        lock = lock_state_dir(self.dir)
        self.watchdog = start_watchdog(self.spec, self.dir, stop if self.owns_process else None)
        try:
            if not self._retrying(stop, "starting", self._start):
                return
            instance = instance_id(self.dir, self.instance_id)
            if self.server is not None:  # where it answers, before it owns anything
                publish = functools.partial(self.server.publish, instance, self.standby)
                self._retrying(stop, "publishing where it serves", publish)
            while not stop.is_set():
                joining = functools.partial(self._join, instance, itertools.count())
                membership = self._retrying(stop, "joining", joining)
                if membership is None:
                    return
                try:
                    membership.run(stop)
                except (Rejoin, Retry, Abandoned) as why:
                    log.warning("%s: rejoining the group: %s", self.spec.group, why)
                    time.sleep(0.5)
                del membership
                trim_heap()
        finally:
            self.watchdog.close()
            lock.close()

    def _start(self) -> bool:
        self.wiring.start()
        return True

    def _join(self, instance: str, tries: itertools.count) -> Membership:
        """A membership; `tries` counts the attempts, whose describe requests wait longer
        after each that failed."""
        watchdog, server = self.watchdog, self.server
        watch = Watch(
            watchdog.calls if watchdog else None,
            watchdog.hung if watchdog else None,
            server.replicas if server else None,
        )
        return self.wiring.join(instance, describe_timeout(next(tries)), watch)

    def _retrying(self, stop: threading.Event, what: str, step: Callable[[], T]) -> T | None:
        """`step()`, again every second while the cluster cannot be reached (a broker down or
        restarting must not end the process) or a client met a fatal error (a fenced producer:
        the next attempt makes new ones); None if `stop` is set meanwhile."""
        while not stop.is_set():
            if self.watchdog is not None:
                self.watchdog.calls.rounds += 1  # each attempt is progress
            try:
                with reaching_kafka():
                    return step()
            except (Retry, Rejoin, Abandoned) as error:
                why = str(error)
            log.warning("%s: %s: cannot reach Kafka (%s); retrying", self.spec.group, what, why)
            # The failed attempt's clients sit in its traceback's cycle: destroy them now, or
            # its transactional producer goes on initializing and later fences the next one.
            gc.collect()
            stop.wait(1.0)
        return None
