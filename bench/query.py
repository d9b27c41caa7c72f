"""Queries of a running job's state (`logwheel run --serve`): latency and queries per second
while the job is under load, for a key the asked instance owns (local), a key another instance
owns (routed: one hop), and `StateClient` (straight to the owner), every answer checked.

Two instances of tests/integration/query_job.py's per-user count run with `--serve 0` (found
through the group), each owning half the partitions; a producer thread writes `--rate` clicks a
second over `--keys` users for the whole run. Instance a is asked over HTTP/1.1 with a kept-alive
connection, one query at a time, for `--duration` seconds per kind (interleaved, `--repeat`
rounds), then by four clients at once (queries/s under concurrency). Checks: every answer is
200 from the expected instance as `active`; a key's count never goes back between two answers
and never exceeds what was sent for it before the answer came; once the load stops, every key's
answer equals what was sent. A wrong answer fails the run (exit 1) and shows no figure.

    python bench/query.py [--quick] [--rate N] [--keys N] [--duration S] [--bootstrap H:P]
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import common  # noqa: E402
from framework.kafka.config import producer_config  # noqa: E402
from framework.query import StateClient  # noqa: E402
from framework.query.connections import Connections  # noqa: E402
from framework.query.directory import read_directory  # noqa: E402
from framework.query.placement import partition_of  # noqa: E402
from framework.query.server import state_path  # noqa: E402
from framework.query.settings import ServeSettings  # noqa: E402
from tests.support import wait_for  # noqa: E402

FULL = {"rate": 500, "keys": 1000, "duration": 10.0, "repeat": 2}
QUICK = {"rate": 100, "keys": 40, "duration": 0.5, "repeat": 1}
QUICK_ARGS = ["--quick"]
COMPUTATION = "per-user"
KINDS = ("local key", "routed key", "StateClient")
CLIENTS = 4


class Load(common.Worker):
    """Writes `rate` clicks a second, keys at random; `sent[key]` counts a click before it is
    produced, so an answer read after it can never be above it."""

    def __init__(self, bootstrap: str, topic: str, keys: list[str], rate: int) -> None:
        super().__init__()
        self.producer = Producer(producer_config(bootstrap))
        self.topic, self.keys, self.rate = topic, keys, rate
        self.sent = dict.fromkeys(keys, 0)
        self.lock = threading.Lock()

    def send(self, key: str) -> None:
        with self.lock:
            self.sent[key] += 1
        self.producer.produce(self.topic, b'{"page": "/"}', key.encode())

    def work(self) -> None:
        rng, started, n = random.Random(7), time.monotonic(), 0
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while n < due:
                self.send(rng.choice(self.keys))
                n += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(30)


class Checker:
    """What every answer must satisfy; `wrong` holds the first violations. A key's count never
    goes back between two answers one client got in turn (clients asking at once may see
    theirs in either order) and never exceeds what was sent before the answer came."""

    def __init__(self, load: Load) -> None:
        self.load, self.wrong, self.lock = load, [], threading.Lock()
        self._seen = threading.local()  # each client's last count per key

    def answer(self, key: str, body: dict, owner: str | None) -> None:
        count = (body.get("value") or {}).get("clicks", 0)
        with self.load.lock:
            sent = self.load.sent[key]
        last = getattr(self._seen, "last", None)
        if last is None:
            last = self._seen.last = {}
        problems = []
        if body.get("served_by") != "active" or (owner and body.get("instance") != owner):
            problems.append(f"served by {body.get('instance')} {body.get('served_by')}")
        if count > sent or count < last.get(key, 0):
            problems.append(f"{count} clicks (sent {sent}, before {last.get(key, 0)})")
        last[key] = max(count, last.get(key, 0))
        if problems:
            with self.lock:
                if len(self.wrong) < 10:
                    self.wrong.append(f"{key}: {', '.join(problems)}")


def measure(ask, keys: list[str], seconds: float) -> list[float]:
    """Latencies (ms) of queries for `keys` in turn, one at a time, for `seconds`."""
    latencies, rng, until = [], random.Random(1), time.monotonic() + seconds
    while time.monotonic() < until:
        key = rng.choice(keys)
        began = time.perf_counter()
        ask(key)
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.Arguments("query latency and queries/s under load", FULL, QUICK)
    args = parser.parse(argv)
    print(f"query: {args.keys} keys, {args.rate} clicks/s, on {args.bootstrap}")
    keys = [f"user-{i}" for i in range(args.keys)]
    with common.Workspace(args.bootstrap, "qy", args.keep) as ws:
        pipeline = ws.pipeline("tests.integration.query_job:build", ws.run, f"{ws.run}-")
        spec = pipeline[COMPUTATION]
        ws.topics.append(f"{spec.group}.serving")
        jobs = {}
        for instance in ("a", "b"):
            job = ws.job(pipeline)
            job.args[job.args.index("--state-dir") + 1] += f"-{instance}"
            job.log = job.log.with_name(f"{job.log.stem}-{instance}.log")
            job.args += ["--serve", "0", "--instance-id", instance]
            jobs[instance] = job.start()
        load = Load(ws.bootstrap, f"{ws.run}-clicks", keys, args.rate)
        try:
            rows, failed = run(ws, spec, jobs, keys, load, args)
        finally:
            load.stop.set()
            for job in jobs.values():
                job.stop()
    if not failed:
        print_table(rows)
    common.write_results("query", args, keys=args.keys, rate=args.rate, rows=rows, failed=failed)
    for line in failed:
        print(line, flush=True)
    return 1 if failed else 0


def owners(ws: common.Workspace, spec) -> dict[int, str]:
    group = spec.group
    described = ws.admin.describe_consumer_groups([group])[group].result(30)
    keyed = spec.keyed_topics[0]
    return {
        tp.partition: m.group_instance_id.removeprefix(f"{group}.")
        for m in described.members
        for tp in m.assignment.topic_partitions
        if tp.topic == keyed
    }


def run(ws, spec, jobs, keys, load, args) -> tuple[list[dict], list[str]]:
    def split() -> bool:
        placed = owners(ws, spec)
        return len(placed) == spec.partitions and set(placed.values()) == {"a", "b"}

    wait_for(lambda: split() or not all(j.alive() for j in jobs.values()), 120, what="the group")
    for job in jobs.values():
        common.check(job)
    placed = owners(ws, spec)
    url = read_directory(ws.bootstrap, {}, spec.group)["a"].url
    local = [k for k in keys if placed[partition_of(k, spec.partitions)] == "a"]
    routed = [k for k in keys if placed[partition_of(k, spec.partitions)] == "b"]
    connections = Connections(ServeSettings())
    client = StateClient(spec.pipeline, bootstrap=ws.bootstrap)
    checker = Checker(load)

    def over_http(key: str, conns: Connections = connections) -> None:
        reply = conns.get(url, state_path(COMPUTATION, key, None))
        if reply.status != 200:
            checker.wrong.append(f"{key}: {reply.status} {reply.body[:200]!r}")
            return
        checker.answer(key, json.loads(reply.body), placed[partition_of(key, spec.partitions)])

    def direct(key: str) -> None:
        checker.answer(key, client.query(COMPUTATION, key), None)

    asks = {"local key": (over_http, local), "routed key": (over_http, routed)}
    asks["StateClient"] = (direct, keys)
    for key in keys:  # a count for every key before measuring
        load.send(key)
    load.producer.flush(30)
    wait_for(lambda: all(client.get(COMPUTATION, k) for k in keys), 120, what="first counts")
    load.start()
    latencies: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(args.repeat):
        for kind in KINDS:
            ask, chosen = asks[kind]
            latencies[kind] += measure(ask, chosen, args.duration)
            common.check(jobs["a"], load)
    concurrent = concurrently(over_http, local, args.duration)
    load.stop.set()
    load.join()
    common.check(jobs["b"], load)
    failed = [f"FAILED: wrong answer: {w}" for w in checker.wrong]
    if failed:
        return [], failed
    final = dict(load.sent)

    def clicks(key: str) -> int | None:
        return (client.get(COMPUTATION, key) or {}).get("clicks")

    wait_for(
        lambda: all(clicks(k) == n for k, n in final.items()), 120,
        what="every key's answer to equal what was sent",
    )  # fmt: skip
    client.close()
    connections.close()
    rows = []
    for kind in KINDS:
        stats = common.spread(latencies[kind])
        seconds = args.duration * args.repeat
        rows.append({"kind": kind, "queries": len(latencies[kind]), "clients": 1,
                     "queries_per_s": len(latencies[kind]) / seconds, **stats})  # fmt: skip
    stats = common.spread(concurrent)
    rows.append({"kind": "local key", "queries": len(concurrent), "clients": CLIENTS,
                 "queries_per_s": len(concurrent) / args.duration, **stats})  # fmt: skip
    return rows, []


def concurrently(ask, keys: list[str], seconds: float) -> list[float]:
    """`CLIENTS` clients asking at once, each on connections of its own."""
    results: list[list[float]] = [[] for _ in range(CLIENTS)]

    def client(i: int) -> None:
        conns = Connections(ServeSettings())
        results[i] = measure(lambda key: ask(key, conns), keys, seconds)
        conns.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [x for r in results for x in r]


def print_table(rows: Sequence[dict]) -> None:
    f = common.fmt
    columns = [("kind", -12), ("clients", 7), ("queries", 8), ("p50 ms", 7), ("p99 ms", 7)]
    columns += [("max ms", 7), ("queries/s", 9)]
    print()
    print(
        common.table(
            columns,
            (
                [r["kind"], r["clients"], r["queries"], f(r["p50"], ".2f"), f(r["p99"], ".2f")]
                + [f(r["max"], ".1f"), f(r["queries_per_s"], ",.0f")]
                for r in rows
            ),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
