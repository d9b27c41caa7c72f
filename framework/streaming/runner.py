"""One `logwheel run` process for one computation (Kafka Streams' StreamThread): a `Runner`
joins the group as often as a membership ends, and its loop polls, hands each run of records
to its task, fires timers and commits — one Kafka transaction per commit holding productions,
journals, marks and input offsets (invariant 1).
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Message

from framework.core.pipeline import Pipeline, PipelineError
from framework.errors import Rejoin, Retry
from framework.kafka.errors import group_event, reaching_kafka
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import check_registry
from framework.kafka.topics import create_part_topics
from framework.streaming.holds import Holds
from framework.streaming.member import Member, describe_timeout
from framework.streaming.release import release_memory
from framework.streaming.startup import instance_id, lock_state_dir, partition_counts
from framework.streaming.task import InputPartition, Task

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL_MS = 1000
"""How long a runner working off a backlog goes between commits. A runner whose input is
drained commits at once, so this bounds output latency only under a backlog; each commit costs
a transaction and one changelog record per changed key, so committing ten times a second (Kafka
Streams' 100 ms) rewrote a third of a Zipf-keyed input's keys each time (CountWords: 5% more CPU
per record). Quix Streams commits every 5 s, Faust every 2.8 s. The dirty documents a second
holds (one per record when every record is a new key) stay cached until the commit, beside the
clean ones the cache evicts (framework.core.keyed_state)."""


IDLE_POLL_MAX_S = 0.25
"""The longest an idle runner sleeps in one poll. Each wake-up costs about 0.2 ms of CPU (the
loop's round: channels, positions, ticks, marks), so 4 a second keep an idle process far under
0.5% of a core, while a mark of another process, or a live source's clock-driven watermark,
waits at most this long to be seen."""


class Runner:
    """Runs one computation of a pipeline until `stop` is set."""

    def __init__(
        self,
        pipeline: Pipeline,
        computation: str,
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
    ) -> None:
        self.pipeline = pipeline
        self.spec = pipeline[computation]
        self.bootstrap = bootstrap
        self.kafka = dict(kafka or {})
        self.registry = registry  # the [registry] table of --config, if any
        self.dir = Path(state_dir) / pipeline.name / computation
        self.commit_interval = commit_interval_ms / 1000
        self.max_batch = max_batch
        self.idle_poll_s = idle_poll_s
        self.instance_id = instance_id
        self.standby = standby

    def run(self, stop: threading.Event) -> None:
        self.pipeline.validate()
        check_registry(self.pipeline, self.spec, self.registry)
        try:
            self.spec.factory()
        except Exception as error:
            raise PipelineError(
                f"computation {self.spec.name!r} cannot be created ({type(error).__name__}: "
                f"{error}): fix its constructor or the factory passed to pipeline.computation"
            ) from error
        lock = lock_state_dir(self.dir)
        try:
            partitions = self._retrying(stop, "starting", self._start)
            instance = instance_id(self.dir, self.instance_id)
            while not stop.is_set():
                join = functools.partial(self._join, partitions, instance, itertools.count())
                member = self._retrying(stop, "joining", join)
                if member is None:
                    return
                try:
                    with reaching_kafka():
                        self._loop(member, stop)
                except (Rejoin, Retry) as why:
                    log.warning("%s: rejoining the group: %s", self.spec.group, why)
                    member.close(clean=False)
                    time.sleep(0.5)
                except BaseException:
                    member.close(clean=False)
                    raise
                else:
                    member.close(clean=True)
                del member
                release_memory()
        finally:
            lock.close()

    def _start(self) -> dict[str, int]:
        create_part_topics(self.bootstrap, self.pipeline, self.spec.name, self.kafka)
        return partition_counts(self.bootstrap, self.kafka, self.spec)

    def _join(self, partitions: dict[str, int], instance: str, tries: Iterator[int]) -> Member:
        """A membership; `tries` counts the attempts, whose describe requests wait longer
        after each that failed."""
        failed = next(tries)
        return Member(
            self.pipeline,
            self.spec,
            bootstrap=self.bootstrap,
            kafka=self.kafka,
            partitions=partitions,
            instance=instance,
            state_dir=self.dir,
            standby=self.standby,
            registry=self.registry,
            describe_s=describe_timeout(failed),
        )

    def _retrying(self, stop: threading.Event, what: str, step):
        """`step()`, again every second while the cluster cannot be reached (a broker down or
        restarting must not end the process) or a client met a fatal error (a fenced producer:
        the next attempt makes new ones); None if `stop` is set meanwhile."""
        while not stop.is_set():
            try:
                with reaching_kafka():
                    return step()
            except (Retry, Rejoin) as error:
                why = str(error)
            log.warning("%s: %s: cannot reach Kafka (%s); retrying", self.spec.group, what, why)
            # The failed attempt's clients sit in its traceback's cycle: destroy them now, or
            # its transactional producer goes on initializing and later fences the next one.
            gc.collect()
            stop.wait(1.0)
        return None

    def _loop(self, member: Member, stop: threading.Event) -> None:
        """Poll, hand records to their tasks, fire timers, commit: until `stop` or the end of
        the membership. Commits as soon as the input is drained (a light input: each commit
        follows the last one at once), else every commit interval (a backlog)."""
        consumer, channels, tasks = member.consumer, member.channels, member.tasks
        isolation, routes, meter, holds = member.isolation, tasks.routes, member.meter, member.holds
        interval, quiet = self.commit_interval, 0
        while not stop.is_set():
            if member.lost:
                raise Rejoin("partitions were lost (session timed out?)")
            max_batch = 1 if isolation.isolating else self.max_batch
            if member.dirty or tasks.restoring:
                msgs = consumer.consume(max_batch, 0)
            else:  # consume() would sit out its whole timeout; poll() returns at the first
                first = consumer.poll(self._idle_timeout(tasks.running(), quiet))
                msgs = [] if first is None else [first, *consumer.consume(max_batch - 1, 0)]
            member.raise_failure()
            heard = channels.poll()
            if member.rewind:  # a commit was aborted, perhaps in a callback inside consume
                member.rewind = False
                tasks.rewind()
                continue
            if member.tables is not None:
                self._sync_tables(member, msgs)
            if isolation.active:
                isolation.handle(msgs, routes, holds)
            else:
                _handle_runs(msgs, routes, holds)
            tasks.step()
            holds.step(routes)
            if msgs:
                member.dirty = True
            elif routes:
                heard += tasks.catch_up_positions()
            for task in tasks.running():
                if task.tick():
                    member.dirty = True
            if not member.dirty and member.committer.marks_moved(tasks.running()):
                # news (a mark heard, a position moved) goes out at once; a mark that moved
                # with the clock alone (a live source's) once a commit interval
                member.dirty = bool(heard) or self._since_commit(member) >= interval
            member.collector.poll()
            if time.monotonic() - meter.reported >= 1:
                meter.report(tasks.running(), tasks.inputs())
            busy = msgs or heard or member.dirty or tasks.restoring or tasks.waiting
            quiet = 0 if busy else quiet + 1
            if member.dirty and (
                len(msgs) < max_batch
                or isolation.isolating
                or self._since_commit(member) >= interval
            ):
                member.commit()

    @staticmethod
    def _since_commit(member: Member) -> float:
        return time.monotonic() - member.committer.last_commit

    def _sync_tables(self, member: Member, msgs: list) -> None:
        """Tables first: read them at least to where they end now, for the tasks about to
        process records (a record never meets a table older than when it was read)."""
        keyed, routes = set(self.spec.keyed_topics), member.tasks.routes
        member.tables.sync(
            {
                m.partition()
                for m in msgs
                if m.topic() in keyed and (m.topic(), m.partition()) in routes
            }
        )
        member.tables.step()

    def _idle_timeout(self, running: list[Task], quiet: int) -> float:
        """How long an idle poll may wait: `idle_poll_s`, doubled for each quiet round up to
        `IDLE_POLL_MAX_S`, and never past the next processing-time timer. Records wake the
        poll at once; what else an idle process waits for (watermark marks, a live source's
        watermark, rebalances) is seen within that long."""
        timeout = min(self.idle_poll_s * 2 ** min(quiet, 8), max(IDLE_POLL_MAX_S, self.idle_poll_s))
        now = time.time()
        for task in running:
            nxt = getattr(task, "executor", None) and task.executor.next_processing_timer()
            if nxt is not None:
                timeout = min(timeout, max(0.0, nxt / 1000 - now))
        return timeout


def _handle_runs(
    msgs: list[Message], routes: dict[tuple[str, int], tuple[Task, InputPartition]], holds: Holds
) -> None:
    """Hand each run of consecutive records of one partition (what a fetch returns) to its
    task at once: the routing is paid per run, not per record. The records of a partition
    held at an earlier one are read again after its resume."""
    start, n = 0, len(msgs)
    while start < n:
        first = msgs[start]
        err = first.error()
        if err is not None:
            group_event(err)
            start += 1
            continue
        topic, partition = first.topic(), first.partition()
        end = start + 1
        while end < n:
            msg = msgs[end]
            if msg.partition() != partition or msg.topic() != topic or msg.error() is not None:
                break
            end += 1
        route = routes.get((topic, partition))
        if route is not None and not route[1].paused:
            holds.run(route[0], route[1], msgs[start:end] if start or end < n else msgs)
        start = end


def default_state_dir() -> Path:
    return Path(os.environ.get("LOGWHEEL_STATE_DIR", ".logwheel/state"))
