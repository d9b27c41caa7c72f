"""The life of one `logwheel run` process for one sink, as `framework.streaming.lifetime` is
for a computation: its state directory held (for the instance id, which makes it a static
member and names it in `logwheel status`), its topics made, then memberships of its group
joined one after another (framework/streaming/sink_loop.py runs each) until the process
stops. A sink keeps no local state: its next owner needs no standby, only the target's
offsets.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from framework.core.pipeline import Pipeline
from framework.errors import Rejoin, Retry
from framework.kafka.config import client_config, consumer_config, producer_config
from framework.kafka.errors import reaching_kafka
from framework.kafka.limits import DEFAULT_MAX_BYTES, read_limits
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.topics import create_part_topics
from framework.streaming.join import IDLE_FETCH_WAIT_MS, describe_timeout
from framework.streaming.membership import DEFAULT_COMMIT_INTERVAL_MS, Pace
from framework.streaming.sink_loop import SinkMembership
from framework.streaming.state_dir import instance_id, lock_state_dir

log = logging.getLogger(__name__)


class SinkRunner:
    """Runs one sink of a pipeline until `stop` is set."""

    def __init__(
        self,
        pipeline: Pipeline,
        sink: str,
        *,
        bootstrap: str,
        state_dir: Path,
        kafka: dict | None = None,
        registry: RegistrySettings | None = None,
        instance_id: str | None = None,
        commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
        idle_poll_s: float = 0.1,
        **_ignored: object,  # a computation's tuning (standby): nothing for a sink
    ) -> None:
        self.pipeline = pipeline
        self.spec = pipeline.part(sink)
        self.bootstrap = bootstrap
        self.kafka = dict(kafka or {})
        self.registry = registry
        self.dir = Path(state_dir) / pipeline.name / sink
        self.pace = Pace(commit_interval_ms / 1000, 1000, idle_poll_s)
        self.instance_id = instance_id

    def run(self, stop: threading.Event) -> None:
        self.pipeline.validate()
        lock = lock_state_dir(self.dir)
        try:
            if self._retrying(stop, "starting", self._start) is None:
                return
            instance = f"{self.spec.group}.{instance_id(self.dir, self.instance_id)}"
            start = getattr(self.spec.sink, "start", None)
            if callable(start):
                start(self.spec.name)
            failed = [0]  # memberships in a row that ended in a failure
            while not stop.is_set():
                membership = self._retrying(
                    stop, "joining", lambda: self._join(instance, failed[0])
                )
                if membership is None:
                    return
                try:
                    membership.run(stop)
                    failed[0] = 0
                except (Rejoin, Retry) as why:
                    log.warning("%s: rejoining the group: %s", self.spec.group, why)
                    failed[0] += 1
                    time.sleep(0.5)
                del membership
        finally:
            lock.close()

    def _start(self) -> bool:
        create_part_topics(self.bootstrap, self.pipeline, self.spec.name, self.kafka)
        return True

    def _join(self, instance: str, failed: int) -> SinkMembership:
        admin = AdminClient(client_config(self.bootstrap, self.kafka))
        config = producer_config(self.bootstrap, extra={"linger.ms": 5, **self.kafka})
        limits = read_limits(
            admin,
            [self.spec.dlq],
            int(config.get("message.max.bytes", DEFAULT_MAX_BYTES)),
            request_timeout=describe_timeout(failed),
        )
        quiet = {"fetch.wait.max.ms": IDLE_FETCH_WAIT_MS, **self.kafka}
        consumer = Consumer(
            consumer_config(self.bootstrap, group=self.spec.group, instance=instance, extra=quiet)
        )
        return SinkMembership(
            self.pipeline,
            self.spec,
            consumer=consumer,
            producer=Producer(config),
            limits=limits,
            instance=instance,
            registry=self.registry,
            pace=self.pace,
        )

    def _retrying(self, stop: threading.Event, what: str, step):
        """`step()`, again every second while the cluster cannot be reached; None if `stop`
        is set meanwhile."""
        while not stop.is_set():
            try:
                with reaching_kafka():
                    return step()
            except (Retry, Rejoin) as error:
                why = str(error)
            log.warning("%s: %s: cannot reach Kafka (%s); retrying", self.spec.group, what, why)
            gc.collect()
            stop.wait(1.0)
        return None
