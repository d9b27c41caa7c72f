"""How the embedded broker is run: its JVMs' options, the settings of a single node, how long
starts, stops and the controller's fencing take, and the error a failed start raises.

Constants only, so that what a start writes can be read (and compared with
docker-compose.yml's broker) without the machinery that starts it (`embedded.py`, `launch.py`).
"""

from __future__ import annotations

from framework.errors import ConfigurationError


class BrokerError(ConfigurationError):
    """A problem with the embedded broker the user must fix; one line that names the fix."""


DEFAULT_PORT = 9092
DEFAULT_SECURE_PORT = 9094
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
JVM_OPTS = ["-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]
JVM_OPTS += ["-Djava.awt.headless=true"]
CONTROLLER_JVM_OPTS = ["-Xms64m", "-Xmx256m"]
"""A controller alone keeps only the cluster's metadata: a smaller heap than the broker's."""
SESSION_TIMEOUT_MS = 9000
"""Kafka's default `broker.session.timeout.ms`: how long after a broker's last heartbeat the
controller fences it."""
FENCE_MARGIN_S = 1.0
"""Waited past a session's expiry, for the controller to fence and commit the fence."""
HEARTBEAT_INTERVAL_MS = 2000
"""Kafka's default `broker.heartbeat.interval.ms`."""
STOP_MARGIN_S = 0.5
"""Kept between a separated broker's kill at the end of its stop and the earliest fence."""

TIMED_OUT_ABORT_SCAN_MS = "10000"
"""How often the transaction coordinator aborts transactions past their timeout; its first scan
comes this long after the broker starts. It must come after the restarted single node has
settled its leadership: for a moment after a restart every partition is led by no broker (the
node first acts on its replayed metadata, then the controller fences its previous incarnation
and elects it again), and Kafka skips a transaction's markers to a partition without a leader,
as if the partition were deleted, then records the transaction complete anyway. A transaction
a SIGKILL left open is then timed out at the first scan; at 1 s that scan fell into that moment,
its records stayed open in every partition it touched, and on `__consumer_offsets` its offsets
stayed pending for good (`tests/integration/test_hanging_transactions.py`). Within 10 s the
node has settled; an abandoned transaction is then aborted 10 to 20 s after it began (a
restarted process aborts its own at once, through its transactional id)."""

SINGLE_NODE_SETTINGS = {
    # One node: every internal topic has one replica, and one in-sync replica is enough.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "8",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "num.partitions": "4",
    # A typo in a stream name should fail loudly, not create an empty topic.
    "auto.create.topics.enable": "false",
    # Changelogs, timer journals and watermark channels are compacted topics.
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "1000",
    "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
    # The log is the truth: keep history so `logwheel reset --to earliest` can replay it.
    "log.retention.ms": "-1",
    "group.initial.rebalance.delay.ms": "0",
    # Kafka's own 10 s, stated: a shorter one loses markers (TIMED_OUT_ABORT_SCAN_MS).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": TIMED_OUT_ABORT_SCAN_MS,
    # A controlled shutdown hands leadership to the other replicas; one node has none, so its
    # partitions would have no leader while it still serves requests, and the markers of a
    # transaction committed then are skipped like those after a restart (see above).
    "controlled.shutdown.enable": "false",
}
"""Broker settings for a single node; docker-compose.yml and the test container use the same."""
