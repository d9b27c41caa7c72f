"""The commit: one Kafka transaction per commit interval (invariant 1), as Quix Streams'
`Checkpoint.commit` and Kafka Streams' `StreamsProducer` own it.

The producer is fenced through the consumer group's metadata (KIP-447), so a member that lost
its partitions cannot commit (invariant 3). Under `at_least_once` the same steps run without
a transaction: outputs are flushed, then the offsets are committed.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from framework.core.metrics import ABORTS, COMMIT_SECONDS, COMMITS
from framework.core.pipeline import ComputationSpec
from framework.core.watermarks import encode_mark
from framework.errors import Rejoin
from framework.kafka.bounded_calls import BoundedCalls, LeftBehind
from framework.kafka.collector import DATA_FAULTS, Collector
from framework.kafka.groups import commit_metadata
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import Task

log = logging.getLogger(__name__)
TIMEOUT_S = 60
STEP_TIMEOUT_S = 15
"""A commit step's own timeout (`send_offsets_to_transaction`, `commit_transaction`); one that
times out is asked again until TIMEOUT_S. A call blocked past it (librdkafka#5456) is left
behind 25 s after it began, not 70: the cluster test's coordinator kill had stalled the
output 64.4 s on one such call (`tests/chaos/test_cluster_faults.py`, bound 60 s)."""
LEFT_BEHIND_S = 10.0
"""How long past its own timeout a transactional call is waited for before it and its
producer are left behind (`framework.kafka.bounded_calls`) and the membership ends."""
SLOW_COMMIT_S = 10.0
"""A commit that takes longer is logged with the time of each step: a broker's failure shows
up in the output only as a stall, and the steps say where the job waited."""


class Committer:
    """Owns the transaction: begin, the numbered steps of a commit, abort."""

    def __init__(
        self,
        spec: ComputationSpec,
        collector: Collector,
        consumer: Consumer,
        instance: str,
    ) -> None:
        self.spec = spec
        self.collector = collector
        self.producer = collector.producer
        self.consumer = consumer
        self.eos = spec.exactly_once
        self.instance = instance
        self.marks: dict[str, tuple] = {}  # what each task last published (Mark.state)
        self.last_commit = time.monotonic()
        self.refusal: KafkaError | None = None  # the broker refused a record's content
        self.calls = BoundedCalls(f"{spec.group}.transactions", spec.name)
        if self.eos:
            self._bounded(self.producer.init_transactions, TIMEOUT_S)
            self.producer.begin_transaction()

    def marks_moved(self, tasks: Iterable[Task]) -> bool:
        """Whether some task's mark would promise more than the one it last published."""
        return any(self.marks.get(t.producer) != t.mark_state() for t in tasks)

    def commit(self, tasks: list[Task], inputs: Iterable[InputPartition]) -> bool:
        """Commit everything since the last commit; False if the transaction was aborted (the
        caller re-runs from the last commit). Raises Rejoin if the membership cannot go on.

        1. Each task writes its changelog and timer journal records into the transaction.
        2. Marks whose promise moved are due; their offsets name where this process's writes
           landed, so the writes are flushed first (invariant 4).
        3. The input positions go into the transaction with the group's metadata (KIP-447),
           carrying the commit time and this instance for `logwheel status`.
        4. The transaction commits; any failure before this point aborts all of it.
        5. Local stores follow (RocksDB is written only after the commit), and the next
           transaction begins at once. (A pause of 1-10 ms before its first request, to let
           the broker write the last one's markers, was measured to cost more than it saved:
           back-to-back commits met no CONCURRENT_TRANSACTIONS backoff on Kafka 4, and with
           the pause exactly-once latency at 300 records/s was p50 16.4 / p95 46.1 ms against
           10.6 / 25.1 ms without, `bench/latency.py --repeat 2`.)
        """
        collector, started = self.collector, time.monotonic()
        steps: dict[str, float] = {}
        try:
            for task in tasks:  # 1
                task.prepare_commit()
            due = [t for t in tasks if self.marks.get(t.producer) != t.mark_state()]  # 2
            if due:
                collector.flush()
            steps["writes"] = time.monotonic()
            sent = {}
            for task in due:
                mark = task.mark()
                sent[task.producer] = mark.state
                collector.send(
                    self.spec.watermarks, task.producer.encode(), encode_mark(mark), partition=0
                )
            metadata = commit_metadata(self.instance)
            offsets = [  # 3
                TopicPartition(i.topic, i.partition, i.position, metadata=metadata) for i in inputs
            ]
            if self.eos:
                if offsets:
                    group = self.consumer.consumer_group_metadata()
                    self._retrying(self.producer.send_offsets_to_transaction, offsets, group)
                steps["offsets"] = time.monotonic()
                self._retrying(self.producer.commit_transaction)  # 4
            else:
                collector.flush()
                if offsets:  # waits for the group's coordinator, however long it is away
                    commit = functools.partial(
                        self.consumer.commit, offsets=offsets, asynchronous=False
                    )
                    self._bounded(commit, wait=TIMEOUT_S + LEFT_BEHIND_S)
        except KafkaException as error:
            self._slow(started, steps, "failed after")
            self._abort(error)
            return False
        self._slow(started, steps, "commit")
        self.marks.update(sent)
        for task in tasks:  # 5
            task.committed()
        if self.eos:
            self.producer.begin_transaction()
        self.last_commit = time.monotonic()
        COMMITS.labels(self.spec.name).inc()
        COMMIT_SECONDS.labels(self.spec.name).observe(self.last_commit - started)
        return True

    def _slow(self, started: float, steps: dict[str, float], last_step: str) -> None:
        """Log a commit slower than SLOW_COMMIT_S, with how long each step took."""
        now = time.monotonic()
        if now - started < SLOW_COMMIT_S:
            return
        times, last = [], started
        for name, at in [*steps.items(), (last_step, now)]:
            times.append(f"{name} {at - last:.1f}s")
            last = at
        log.warning(
            "%s: a commit took %.1fs (%s)", self.spec.group, now - started, ", ".join(times)
        )

    def _retrying(self, step, *args) -> None:
        """A transactional step, called again while it fails with an error librdkafka calls
        retriable and the transaction is still good (its broker's connection broke or timed
        out, its coordinator moved: a broker of the cluster failed), for up to TIMEOUT_S;
        as librdkafka advises, and cheaper than a rejoin that re-runs from the last commit."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                return self._bounded(step, *args, STEP_TIMEOUT_S)
            except KafkaException as error:
                err = error.args[0] if error.args else None
                retriable = isinstance(err, KafkaError) and err.retriable()
                if not retriable or err.txn_requires_abort() or err.fatal():
                    raise
                if time.monotonic() > deadline:
                    raise
                log.info("%s: %s, retrying: %s", self.spec.group, step.__name__, err.str())
                time.sleep(0.1)

    def _bounded(self, call, *args, wait: float | None = None) -> object:
        """`call(*args)`, left behind if it blocks past `wait` s (default: its timeout, the
        last of `args`, plus LEFT_BEHIND_S)."""
        wait = args[-1] + LEFT_BEHIND_S if wait is None else wait
        try:
            return self.calls.call(call, *args, wait=wait)
        except LeftBehind:
            raise Rejoin(
                f"{self.calls.stuck} still blocked {LEFT_BEHIND_S:g} s past its "
                f"{wait - LEFT_BEHIND_S:g} s timeout (librdkafka#5456): its client is left "
                "behind and new clients made"
            ) from None

    def _abort(self, error: KafkaException) -> None:
        """A commit failed. If the transaction can be aborted (a rebalance moved the group's
        generation under it, the broker refused a record), abort it so the caller re-runs
        from the last commit, as Kafka Streams does; anything else ends this membership."""
        err = error.args[0] if error.args else None
        abortable = isinstance(err, KafkaError) and (
            not self.eos or err.txn_requires_abort() or err.code() in DATA_FAULTS
        )
        if not abortable:
            raise Rejoin(f"commit failed: {error}") from error
        self.collector.poll()  # serve the delivery reports: which records were refused
        self.refusal = self.collector.refusal() or (err if err.code() in DATA_FAULTS else None)
        log.warning("%s: commit failed, re-running from the last commit: %s", self.spec.group, err)
        ABORTS.labels(self.spec.name).inc()
        if self.eos:
            try:
                self._bounded(self.producer.abort_transaction, TIMEOUT_S)
                self.producer.begin_transaction()
            except KafkaException as fatal:
                raise Rejoin(f"abort failed: {fatal}") from fatal
        else:
            self.producer.flush(TIMEOUT_S)  # what is still undelivered is read again anyway
        self.collector.discard_errors()

    def abandon(self) -> None:
        """Leaving without committing: abort what is open (refused at once if a call was left
        behind: the next producer with this transactional id aborts it)."""
        if self.eos:
            try:
                self._bounded(self.producer.abort_transaction, 10)
            except (KafkaException, KafkaError, Rejoin) as error:  # a fenced producer's, bare
                log.info("%s: abort on close: %s", self.spec.group, error)

    def close(self) -> None:
        """End the thread of the transactional calls."""
        self.calls.close()
