"""`python -m jobs.enrich.demo`: the stream-table join end to end on the embedded broker.

Runs `logwheel run jobs.enrich:pipeline` from a clean slate, writes three profiles, a few page
views, then updates one profile and deletes another, writes more page views, and prints every
enriched page view: each joined with its user's profile as of its processing.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from changelog import ChangelogTable
from framework.serde.catalogue import decoder_for, encoder_for
from jobs.demo import add_target, clean_slate, demo_bootstrap, start_job
from jobs.enrich import pipeline

STATE_DIR = Path(".logwheel/enrich-demo-state")
PROFILES = {"ann": ("Ann", "FR"), "bo": ("Bo", "SE"), "cy": ("Cy", "US")}
EXPECTED = {"1": "FR", "2": "SE", "3": "US", "4": None, "5": "DE", "6": None, "7": "US"}
"""The country each view is enriched with: views 1-4 before ann moved and bo was deleted."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_target(parser)
    bootstrap = demo_bootstrap(parser.parse_args(argv), pipeline)
    clean_slate(bootstrap, pipeline, STATE_DIR)
    log = Path(".logwheel/enrich-demo-run.log")
    job = start_job("jobs.enrich:pipeline", bootstrap, STATE_DIR, log)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    encode = encoder_for("enrich.PageView")
    views = 0

    def update(value: dict) -> None:
        producer.produce("profile-updates", json.dumps(value).encode())
        producer.flush(30)

    def view(user: str) -> None:
        nonlocal views
        views += 1
        producer.produce("page-views", encode({"id": str(views), "user": user, "url": "/home"}))
        producer.flush(30)

    try:
        for user, (name, country) in PROFILES.items():
            update({"user": user, "name": name, "country": country})
        _wait_for_table({u: 1 for u in PROFILES}, bootstrap)
        for user in [*PROFILES, "dee"]:
            view(user)
        _read(bootstrap, views)  # processed: the changes below come after them
        update({"user": "ann", "country": "DE"})
        update({"user": "bo", "delete": True})
        _wait_for_table({"ann": 2, "cy": 1}, bootstrap)
        for user in PROFILES:
            view(user)
        enriched = _read(bootstrap, views)
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(60)
    for v in sorted(enriched, key=lambda v: int(v["id"])):
        profile = "no profile" if v["name"] is None else f"{v['name']}, {v['country']}"
        print(f"enrich: view {v['id']:>2} by {v['user']:4} -> {profile}")
    got = {v["id"]: v["country"] for v in enriched}
    ok = got == EXPECTED
    print("enrich: OK" if ok else f"enrich: FAILED: expected countries {EXPECTED}, got {got}")
    return 0 if ok else 1


def _wait_for_table(versions: dict[str, int], bootstrap: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with ChangelogTable("enrich.profiles.changelog", bootstrap=bootstrap) as table:
            if {k: v["version"] for k, v in table.catch_up().items()} == versions:
                return
        time.sleep(0.2)
    raise SystemExit(
        "enrich: the profiles did not reach the changelog; see .logwheel/enrich-demo-run.log"
    )


def _read(bootstrap: str, expect: int, timeout: float = 60) -> list[dict]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "enrich-demo",
            "isolation.level": "read_committed",
        }
    )
    topic = "enriched-page-views"
    meta = consumer.list_topics(topic, timeout=30).topics[topic]
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
    decode, out, deadline = decoder_for("enrich.EnrichedPageView"), [], time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        out += [decode(m.value()) for m in consumer.consume(100, 0.5) if m.error() is None]
    consumer.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
