"""The life of one `logwheel run` process for one computation: its state directory held, its
topics made and their partition counts read, then memberships of the group joined one after
another (each running the loop: framework/streaming/membership.py) until the process stops,
with the memory an ended one leaves behind given back — watched throughout by the process's
watchdog (framework/streaming/watchdog.py), whose abandoned calls end a membership as a
`Rejoin` does.
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka.admin import AdminClient

from framework.core.pipeline import ComputationSpec, Pipeline, PipelineError
from framework.errors import Abandoned, Rejoin, Retry
from framework.kafka.config import client_config
from framework.kafka.errors import reaching_kafka
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.stream_codecs import check_registry
from framework.kafka.topics import create_part_topics
from framework.query.server import QueryServer
from framework.streaming.heap import trim_heap
from framework.streaming.join import describe_timeout, join
from framework.streaming.membership import DEFAULT_COMMIT_INTERVAL_MS, Membership, Pace
from framework.streaming.state_dir import instance_id, lock_state_dir
from framework.streaming.watchdog import Watchdog, start_watchdog

log = logging.getLogger(__name__)


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
        owns_process: bool = False,
        server: QueryServer | None = None,
    ) -> None:
        """`owns_process`: this runner is its process (`logwheel run`), whose main thread it
        runs in; its watchdog may interrupt that thread and start the process again. `server`
        answers queries of this computation's state (`--serve`) from the replicas it holds."""
        self.pipeline = pipeline
        self.spec = pipeline[computation]
        self.bootstrap = bootstrap
        self.kafka = dict(kafka or {})
        self.registry = registry  # the [registry] table of --config, if any
        self.dir = Path(state_dir) / pipeline.name / computation
        self.pace = Pace(commit_interval_ms / 1000, max_batch, idle_poll_s)
        self.instance_id = instance_id
        self.standby = standby
        self.owns_process = owns_process
        self.watchdog: Watchdog | None = None
        self.server = server

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
        self.watchdog = start_watchdog(self.spec, self.dir, stop if self.owns_process else None)
        try:
            partitions = self._retrying(stop, "starting", self._start)
            instance = instance_id(self.dir, self.instance_id)
            if self.server is not None:  # where it answers, before it owns anything
                publish = functools.partial(self.server.publish, instance, self.standby)
                self._retrying(stop, "publishing where it serves", publish)
            while not stop.is_set():
                joining = functools.partial(self._join, partitions, instance, itertools.count())
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

    def _start(self) -> dict[str, int]:
        create_part_topics(self.bootstrap, self.pipeline, self.spec.name, self.kafka)
        return partition_counts(self.bootstrap, self.kafka, self.spec)

    def _join(self, partitions: dict[str, int], instance: str, tries: Iterator[int]) -> Membership:
        """A membership; `tries` counts the attempts, whose describe requests wait longer
        after each that failed."""
        failed = next(tries)
        return join(
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
            pace=self.pace,
            calls=self.watchdog.calls if self.watchdog else None,
            hung=self.watchdog.hung if self.watchdog else None,
            replicas=self.server.replicas if self.server else None,
        )

    def _retrying(self, stop: threading.Event, what: str, step):
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


def partition_counts(bootstrap: str, kafka: dict, spec: ComputationSpec) -> dict[str, int]:
    """Every topic's partition count; a configuration error naming the fix where a table or
    an input read by its Kafka key is not co-partitioned with the computation's key space."""
    admin = AdminClient(client_config(bootstrap, kafka))
    topics = admin.list_topics(timeout=30).topics
    counts = {name: len(meta.partitions) for name, meta in topics.items()}
    for name, topic in spec.tables.items():
        if counts.get(topic) != spec.partitions:
            raise PipelineError(
                f"{spec.group} joins table {name!r} ({topic}), which must have "
                f"{spec.partitions} partitions like its key space but has "
                f"{counts.get(topic, 'none (it does not exist)')}: co-partition them "
                "(same partition count and keys) or create the topic"
            )
    for i in spec.inputs:
        if i.key is None and counts.get(i.stream) != spec.partitions:
            raise PipelineError(
                f"{spec.group} reads {i.stream!r} by its Kafka key, so it needs "
                f"{spec.partitions} partitions like its state but it has "
                f"{counts.get(i.stream)}: give the input key_by(...) or recreate the topic"
            )
    return counts
