"""Querying state (README, "Querying state"): two instances of a job, each serving
(`--serve 0`, found through the group) and keeping a standby replica (`--standby 1`), share
one run of the job for every test here, the SIGKILL last."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from framework.kafka.groups import standby_partitions
from framework.kafka.topic_ends import end_offsets
from framework.query import StateClient
from framework.query.directory import read_directory
from framework.query.placement import partition_of
from framework.query.replicas import Replicas
from framework.query.server import QueryServer, state_path
from tests.support import REPO, Job, UniqueJob, produce, wait_for

pytestmark = pytest.mark.timeout(300)
USERS = [f"user-{i}" for i in range(24)]
COMPUTATION = "per-user"


@dataclass
class Shared:
    kafka: str
    unique: UniqueJob
    jobs: dict[str, Job]
    client: StateClient
    truth: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def spec(self):
        return self.unique.pipeline[COMPUTATION]

    def owned(self) -> dict[str, set[int]]:
        """Instance -> the partitions the group has assigned it now."""
        group = self.spec.group
        admin = AdminClient({"bootstrap.servers": self.kafka})
        described = admin.describe_consumer_groups([group])[group].result(30)
        keyed = self.spec.keyed_topics[0]
        return {
            m.group_instance_id.removeprefix(f"{group}."): {
                tp.partition for tp in m.assignment.topic_partitions if tp.topic == keyed
            }
            for m in described.members
        }

    def url(self, instance: str) -> str:
        return read_directory(self.kafka, {}, self.spec.group)[instance].url

    def send(self, clicks: list[str], views: list[str], block: str | None = None) -> None:
        extra = {"block": block} if block else {}
        produce(
            self.kafka,
            f"{self.unique.prefix}clicks",
            [(u, {"page": "/", **extra}, None) for u in clicks],
        )
        produce(
            self.kafka, f"{self.unique.prefix}views", [(None, {"user": u}, None) for u in views]
        )
        if block is None:
            for kind, users in (("clicks", clicks), ("views", views)):
                for user in users:
                    counts = self.truth.setdefault(user, {})
                    counts[kind] = counts.get(kind, 0) + 1


def settled(shared: Shared) -> None:
    """Wait until every key's answer is its truth: everything sent is committed."""
    wait_for(
        lambda: all(shared.client.get(COMPUTATION, u) == shared.truth[u] for u in USERS), 90,
        what="every key's answer to reach its truth",
    )  # fmt: skip


def http_get(url: str, key: str, max_lag: int | None = None) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url + state_path(COMPUTATION, key, max_lag), timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        assert error.code != 503 or error.headers["Retry-After"], "503 without Retry-After"
        return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def shared(kafka: str, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("query")
    unique = UniqueJob(kafka, tmp, "tests.integration.query_job:build", "q")
    config = tmp / "query.toml"
    config.write_text('[kafka]\n"session.timeout.ms" = 6000\n')  # the group moves sooner
    jobs = {}
    for instance in ("a", "b"):
        job = unique.job(f"state-{instance}", config=config)
        job.args += ["--serve", "0", "--standby", "1", "--instance-id", instance]
        jobs[instance] = job.start()
    client = StateClient(unique.pipeline, bootstrap=kafka, deadline_s=60)
    state = Shared(kafka, unique, jobs, client)
    try:
        wait_for(
            lambda: {k: len(v) for k, v in state.owned().items()} == {"a": 2, "b": 2}, 90,
            what="a and b to own two partitions each",
        )  # fmt: skip
        state.send(USERS, USERS[::2])
        state.send(USERS[::3], USERS)
        yield state
    finally:
        client.close()
        for job in jobs.values():
            job.stop()


def test_every_key_answers_its_committed_state_through_the_client_either_instance_and_the_cli(
    shared,
):
    settled(shared)
    owners = {p: i for i, parts in shared.owned().items() for p in parts}
    for instance in ("a", "b"):
        url = shared.url(instance)
        for user in USERS:
            status, answer = http_get(url, user)
            partition = partition_of(user, shared.spec.partitions)
            assert status == 200, answer
            assert answer == {
                "key": user, "value": shared.truth[user], "partition": partition,
                "instance": owners[partition], "served_by": "active", "lag": 0,
            }  # fmt: skip
    assert shared.client.get(COMPUTATION, "nobody") is None
    unknown = urllib.request.Request(shared.url("b") + "/state/no-such/x")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(unknown, timeout=10)
    assert missing.value.code == 404 and "per-user" in json.loads(missing.value.read())["error"]
    job_ref = f"{shared.unique.module}:pipeline"
    for user in USERS[:1]:
        cli = subprocess.run(
            [sys.executable, "-m", "framework.cli", "state", "get", job_ref, COMPUTATION, user,
             "--bootstrap", shared.kafka],
            capture_output=True, text=True, timeout=60, cwd=REPO,
            env={"PYTHONPATH": f"{shared.unique.directory}:{REPO}", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout)["value"] == shared.truth[user]


def test_a_standby_answers_within_max_lag(shared):
    settled(shared)
    owned = shared.owned()
    count = shared.spec.partitions
    for instance, parts in owned.items():
        (standby, *_) = standby_partitions(parts, 1, count)
        user = next(u for u in USERS if partition_of(u, count) == standby)
        status, answer = http_get(shared.url(instance), user, max_lag=1000)
        assert status == 200, answer
        assert answer["served_by"] == "standby" and answer["instance"] == instance
        assert answer["lag"] <= 1000 and answer["value"] == shared.truth[user]
        status, answer = http_get(shared.url(instance), user)  # no bound: its owner answers
        assert (status, answer["served_by"]) == (200, "active") and answer["instance"] != instance


class _Store:
    """A standby's store that applied its changelog up to `applied` and holds `docs`."""

    def __init__(self, docs: dict[str, bytes], applied: int) -> None:
        self.docs, self.applied = docs, applied

    def load(self, key: str) -> bytes | None:
        return self.docs.get(key)

    def checkpoint(self) -> dict[str, int]:
        return {"changelog": self.applied}


def test_a_standby_refuses_beyond_max_lag_and_its_owner_answers(shared):
    settled(shared)
    user = USERS[0]
    partition = partition_of(user, shared.spec.partitions)
    changelog = shared.spec.changelog
    admin = AdminClient({"bootstrap.servers": shared.kafka})
    end = end_offsets(admin, [(changelog, partition)], committed=True)[(changelog, partition)]
    assert end > 2
    replicas = Replicas()
    replicas.follow(partition, _Store({user: b'{"clicks": -1}'}, applied=1))
    server = QueryServer(
        shared.unique.pipeline, COMPUTATION, replicas, bootstrap=shared.kafka, port=0
    )
    try:
        within = http_get(server.url, user, max_lag=end - 1)
        beyond = http_get(server.url, user, max_lag=end - 2)
    finally:
        server.close()
    assert within == (200, {
        "key": user, "value": {"clicks": -1}, "partition": partition, "instance": "",
        "served_by": "standby", "lag": end - 1,
    })  # fmt: skip
    assert beyond[0] == 200 and beyond[1]["served_by"] == "active"
    assert beyond[1]["value"] == shared.truth[user]


def test_a_hooks_write_is_not_visible_before_its_commit(shared, tmp_path: Path):
    user = USERS[1]
    before = dict(shared.truth[user])
    flag = tmp_path / "release"
    shared.send([user], [], block=str(flag))
    entered = Path(f"{flag}.entered")  # asked at once: an owner whose loop is stuck 5 s says 503
    wait_for(entered.exists, 60, interval=0.01, what="the hook to write and block")
    try:
        assert shared.client.get(COMPUTATION, user) == before
        for instance in ("a", "b"):
            assert http_get(shared.url(instance), user)[1]["value"] == before
    finally:
        flag.touch()
    shared.truth[user]["clicks"] += 1
    wait_for(lambda: shared.client.get(COMPUTATION, user) == shared.truth[user], 60,
             what="the committed write")  # fmt: skip


def test_after_a_sigkill_answers_are_right_or_503_until_every_key_answers_again(shared):
    url = shared.url("b")
    shared.jobs["a"].kill()
    unavailable, deadline = 0, time.monotonic() + 120
    while True:
        answered = {}
        for user in USERS:
            status, answer = http_get(url, user)
            if status == 200:
                assert answer["value"] == shared.truth[user], answer
                answered[user] = answer["instance"]
            else:
                assert status == 503, answer
                unavailable += 1
        if set(answered.values()) == {"b"} and len(answered) == len(USERS):
            break
        assert time.monotonic() < deadline, f"still unanswered: {set(USERS) - set(answered)}"
        time.sleep(0.2)
    assert unavailable > 0  # the killed owner's keys were refused while the group moved
    with StateClient(shared.unique.pipeline.name, bootstrap=shared.kafka) as client:
        assert {u: client.get(COMPUTATION, u) for u in USERS} == shared.truth
