"""`logwheel broker start --nodes 3` and its node commands, through the CLI, on a cluster of
the test's own (LOGWHEEL_BROKER_DIR under tmp_path, free ports): the bootstrap alone on the
last line, status per node with leaders and under-replicated partitions, a node killed and
started again, and `logwheel topics` replicating a pipeline's topics three times with
min.insync.replicas 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from framework.broker.cluster import Cluster
from tests.support import UniqueJob, wait_for

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "framework.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _min_insync(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return configs["min.insync.replicas"].value


def test_a_three_node_cluster_starts_reports_each_node_and_survives_a_killed_node(tmp_path):
    home = tmp_path / "cluster"
    env = {**os.environ, "LOGWHEEL_BROKER_DIR": str(home), "PYTHONPATH": f"{tmp_path}:{REPO}"}
    env.pop("LOGWHEEL_BROKER_PORT", None)
    env.pop("LOGWHEEL_BOOTSTRAP", None)
    env["LOGWHEEL_BROKER_JVM_OPTS"] = "-XX:TieredStopAtLevel=1"
    try:
        first = _cli(env, "broker", "start", "--nodes", "3")
        assert first.returncode == 0, first.stderr
        bootstrap = first.stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}", bootstrap), first.stdout
        again = _cli(env, "broker", "start")
        assert again.stdout.strip().splitlines()[-1] == bootstrap
        assert "starting" not in again.stderr  # nothing was started again

        job = UniqueJob(bootstrap, tmp_path, "jobs.wordcount:build", "wc", create=False)
        topics = _cli(env, "topics", f"{job.module}:pipeline")
        assert topics.returncode == 0, topics.stderr
        cluster = Cluster(home)
        lines = [line.split()[1] for line in topics.stdout.splitlines()]
        for name in lines:
            assert {len(p.replicas) for p in cluster.partitions(name).values()} == {3}, name
        assert _min_insync(bootstrap, lines[0]) == "2"
        for internal in ("__consumer_offsets", "__transaction_state"):
            assert {len(p.replicas) for p in cluster.partitions(internal).values()} == {3}

        status = _cli(env, "broker", "status")
        assert status.returncode == 0, status.stderr
        assert re.search(r"node 2 at 127\.0\.0\.1:\d+: running \(pid \d+\), leads", status.stdout)
        assert "under-replicated partitions: 0" in status.stdout
        controller = cluster.controller()
        assert f"active controller: node {controller}" in status.stdout

        assert _cli(env, "broker", "kill", "--node", str(controller)).returncode == 0
        wait_for(lambda: cluster.controller() not in (None, controller), 60, what="a new one")
        assert _cli(env, "broker", "start", "--node", str(controller)).returncode == 0
        wait_for(lambda: not cluster.under_replicated(), 60, what="the old controller in sync")

        killed = _cli(env, "broker", "kill", "--node", "2")
        assert killed.returncode == 0 and "node 2 killed" in killed.stdout, killed.stderr
        wait_for(lambda: cluster.under_replicated(), 60, what="the fence of node 2")
        status = _cli(env, "broker", "status")
        assert "node 2 at" in status.stdout and ": down" in status.stdout, status.stdout
        assert re.search(r"under-replicated partitions: [1-9]", status.stdout), status.stdout
        assert re.search(r"in sync \[[13], [13]\]", status.stdout), status.stdout

        restarted = _cli(env, "broker", "start", "--node", "2")
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip().splitlines()[-1] == bootstrap
        wait_for(lambda: not cluster.under_replicated(), 60, what="node 2 back in sync")

        stopped = _cli(env, "broker", "stop", "--node", "3")
        assert "node 3 stopped" in stopped.stdout, stopped.stderr
        assert cluster.pids()[3] is None and all(cluster.pids()[i] for i in (1, 2))
    finally:
        done = _cli(env, "broker", "stop")
    assert done.returncode == 0, done.stderr
    assert _cli(env, "broker", "status").returncode == 3
