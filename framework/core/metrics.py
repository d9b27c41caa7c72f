"""Prometheus metrics of a `logwheel run` process (prometheus-client), served on
`--metrics-port` (or `LOGWHEEL_METRICS_PORT`).

Names follow Prometheus conventions; labels are bounded (computation, stream, topic,
partition, stage, reason class — never keys). The per-record path pays nothing for them:
records in and out are counted in plain integers and added to the counters at each commit;
gauges are set at each commit.
"""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

RECORDS_IN = Counter(
    "logwheel_records_in", "Records read from an input stream.", ["computation", "stream"]
)
RECORDS_OUT = Counter(
    "logwheel_records_out",
    "Records written to a topic (outputs, repartition topics, changelog, timers, marks, dead "
    "letters), counted when the broker acknowledged them.",
    ["computation", "topic"],
)
DEAD_LETTERS = Counter(
    "logwheel_dead_letters",
    "Bad records, by stage and reason class (the exception type), whatever the error policy.",
    ["computation", "stage", "reason"],
)
LATE_RECORDS = Counter(
    "logwheel_late_records",
    "Records that arrived behind the input low watermark (for a windowed computation: after "
    "all their windows had closed), dropped, dead-lettered or handed to on_late_record.",
    ["computation"],
)
PERCENTILE_LATE_RECORDS = Counter(
    "logwheel_percentile_late_records",
    "Late records (also in logwheel_late_records) that were late only because the computation "
    "fires on a percentile low watermark: the strict one had not passed them.",
    ["computation"],
)
DUPLICATES = Counter(
    "logwheel_duplicates",
    "Records dropped before their hook because their id was already seen for their key "
    "(dedup=Dedup(...)).",
    ["computation"],
)
DEDUP_EXPIRED = Counter(
    "logwheel_dedup_expired",
    "Records of a deduplicating computation older than its dedup horizon behind the input "
    "low watermark: their ids may have been collected, so they were processed unchecked.",
    ["computation"],
)
COMMITS = Counter(
    "logwheel_commits", "Commits (Kafka transactions) that succeeded.", ["computation"]
)
COMMIT_SECONDS = Histogram(
    "logwheel_commit_seconds",
    "Time one commit takes, from the first journal record to the transaction's end.",
    ["computation"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)
ABORTS = Counter(
    "logwheel_transaction_aborts",
    "Commits aborted and re-run from the last commit (rebalance, refused record).",
    ["computation"],
)
REBALANCES = Counter(
    "logwheel_rebalances",
    "Partitions assigned to or taken from this process.",
    ["computation", "kind"],
)
RESTORED_RECORDS = Counter(
    "logwheel_restore_records",
    "Changelog and timer-journal records applied while restoring task stores.",
    ["computation"],
)
RESTORE_SECONDS = Counter(
    "logwheel_restore_seconds", "Time spent restoring task stores.", ["computation"]
)
UNDECODABLE = Counter(
    "logwheel_undecodable_internal_records",
    "Internal records (watermark marks, timer entries) that could not be decoded and were skipped.",
    ["topic"],
)
FUTURE_RECORDS = Counter(
    "logwheel_future_records",
    "Source records stamped further ahead of wall time than the source's max_future_ms: they "
    "move no watermark (processed at wall time plus max_future_ms, or dead-lettered under "
    'on_future="dead_letter").',
    ["computation", "stream"],
)
DROPPED_HEADERS = Counter(
    "logwheel_dropped_headers",
    "Headers in the logwheel. namespace (other than logwheel.id) on records read from outside "
    "sources, dropped before anything reads them: only logwheel writes them.",
    ["stream"],
)
HOOK_TIMEOUTS = Counter(
    "logwheel_hook_timeouts",
    "Hook calls (key extractors and timers' hooks included) that ran past the computation's "
    "hook_timeout_ms and were abandoned: their record or timer goes to the dead-letter topic at "
    'stage "timeout" and the work starts again from the last commit.',
    ["computation"],
)
STUCK_CALLS = Counter(
    "logwheel_stuck_calls",
    "Calls into Kafka's client (or other runtime calls of the main thread) that ran past their "
    "timeout and a margin and were left behind or interrupted: the group membership ended and "
    "the work started again from the last commit.",
    ["computation", "call"],
)
HELD_PARTITIONS = Gauge(
    "logwheel_held_partitions",
    "Input partitions held at a record that needs a service that does not answer (the Schema "
    "Registry), read again with backoff.",
    ["computation"],
)
HOLD_RETRIES = Counter(
    "logwheel_hold_retries",
    "Times a record could not be read because a service it needs (the Schema Registry) did "
    "not answer, and its partition was held for a retry.",
    ["computation"],
)
CONSUMER_LAG = Gauge(
    "logwheel_consumer_lag",
    "Offsets between this process's position and the end of an input partition, at the last "
    "commit (transaction markers included).",
    ["computation", "topic", "partition"],
)
INPUT_WATERMARK = Gauge(
    "logwheel_input_low_watermark_ms",
    "A task's strict input low watermark, ms since the epoch (absent while unknown).",
    ["computation", "partition"],
)
OUTPUT_WATERMARK = Gauge(
    "logwheel_output_low_watermark_ms",
    "The low watermark a task publishes for its outputs, ms since the epoch.",
    ["computation", "partition"],
)
PERCENTILE_WATERMARK = Gauge(
    "logwheel_percentile_low_watermark_ms",
    "The percentile low watermark a task of a computation declared with Percentile fires on, ms "
    "since the epoch (logwheel_input_low_watermark_ms stays the strict one).",
    ["computation", "partition"],
)
WATERMARK_LAG = Gauge(
    "logwheel_watermark_lag_seconds",
    "How far a task's output low watermark is behind wall time.",
    ["computation", "partition"],
)

GLOBAL_TABLE_RECORDS = Counter(
    "logwheel_global_table_records_read",
    "Records a process read from a global table's topic into its local replica (a restart "
    "with a current replica reads only those written since it stopped).",
    ["computation", "table"],
)
GLOBAL_TABLE_SKIPPED = Counter(
    "logwheel_global_table_records_skipped",
    "Records of a global table's topic not applied to its replica, by reason (no key).",
    ["computation", "table", "reason"],
)

DEFAULT_ADDR = "127.0.0.1"
"""Metrics are served on loopback unless an address is chosen (`--metrics-addr`): they name
topics, computations and lags, which are nobody else's business; the image sets 0.0.0.0."""


def serve(port: int, addr: str = DEFAULT_ADDR) -> int:
    """Serve the metrics on `addr`:`port` (port 0: a free one); returns the port."""
    server, _ = start_http_server(port, addr=addr)
    actual = server.server_port
    log.info("metrics on http://%s:%d/metrics", addr, actual)
    return actual
