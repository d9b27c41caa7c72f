"""`make demo`: Zeitgeist end to end on the embedded broker.

Starts from a clean slate (the pipeline's topics and local state are removed), runs
`logwheel run jobs.zeitgeist:pipeline`, feeds it two generated minutes of searches with one
planted spike and one planted dip, prints every anomaly found with its time, and exits 0 only
if the planted ones were found and nothing else.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from framework.core.clock import now_ms
from framework.serde.catalogue import decoder_for
from jobs.demo import add_target, clean_slate, demo_bootstrap, start_job
from jobs.zeitgeist import pipeline
from jobs.zeitgeist.generator import planted
from jobs.zeitgeist.inject import inject

STATE_DIR = Path(".logwheel/demo-state")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120, help="event-time span (120)")
    parser.add_argument("--speed", type=float, default=8.0, help="times real time (8)")
    add_target(parser)
    args = parser.parse_args(argv)
    bootstrap = demo_bootstrap(args, pipeline)

    print("zeitgeist: clean slate (topics and local state of earlier demos removed)")
    clean_slate(bootstrap, pipeline, STATE_DIR)
    job = start_job("jobs.zeitgeist:pipeline", bootstrap, STATE_DIR, Path(".logwheel/demo-run.log"))
    try:
        start = now_ms() - args.seconds * 1000
        print(f"zeitgeist: injecting {args.seconds} s of searches at {args.speed:g}x real time")
        sent = inject(bootstrap, start, args.seconds, args.speed)
        print(f"zeitgeist: sent {sent} searches; waiting for the last windows to close")
        found = _anomalies(bootstrap, job)
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(60)
    return _report(found, planted(start))


def _anomalies(bootstrap: str, job: subprocess.Popen, quiet_s: float = 8.0) -> list[dict]:
    """Every anomaly the detectors report, until none has come for `quiet_s` seconds."""
    decode = decoder_for("zeitgeist.Anomaly")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"zeitgeist-demo-{os.getpid()}",
            "isolation.level": "read_committed",
        }
    )
    parts = consumer.list_topics("anomalies", timeout=30).topics["anomalies"].partitions
    consumer.assign([TopicPartition("anomalies", p, OFFSET_BEGINNING) for p in parts])
    found, last = [], time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            if job.poll() is not None:
                raise SystemExit(f"the job exited ({job.returncode}): see .logwheel/demo-run.log")
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    anomaly = decode(msg.value())
                    found.append(anomaly)
                    _print(anomaly)
                    last = time.monotonic()
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise SystemExit(f"reading anomalies: {msg.error()}")
    finally:
        consumer.close()
    return found


def _print(anomaly: dict) -> None:
    when = datetime.fromtimestamp(anomaly["window_start"] / 1000, UTC).strftime("%H:%M:%S")
    print(
        f"  {anomaly['kind']:5} {anomaly['query']!r:12} at {when} UTC: "
        f"observed {anomaly['observed']}, expected {anomaly['expected']:.1f}"
    )


def _report(found: list[dict], expected: list[tuple[str, str, int, int]]) -> int:
    def planted_for(a: dict):
        return next(
            (p for p in expected if (p[0], p[1]) == (a["query"], a["kind"])
             and p[2] <= a["window_start"] <= p[3]),
            None,
        )  # fmt: skip

    missed = [p for p in expected if not any(planted_for(a) == p for a in found)]
    extra = [a for a in found if planted_for(a) is None]
    for query, kind, first, _ in expected:
        when = datetime.fromtimestamp(first / 1000, UTC).strftime("%H:%M:%S")
        status = "MISSED" if (query, kind, first, _) in missed else "found"
        print(f"zeitgeist: planted {kind} of {query!r} at {when} UTC: {status}")
    if extra:
        print(f"zeitgeist: {len(extra)} anomalies outside the planted ones")
    ok = not missed and not extra
    print("zeitgeist: OK" if ok else "zeitgeist: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
