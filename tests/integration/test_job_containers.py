"""Jobs as real containers (podman): the image built from the Dockerfile on the local Debian
base; containers of one computation share its consumer group, one is SIGKILLed (`podman kill
-s KILL`) and one added while lines flow, and every count is written exactly once; each
container's name is its instance id, so the killed one's replacement of the same name is the
same member; `podman stop` (SIGTERM) exits 0 within its grace.

Reduced in `make test` (1,000 lines or more, two counting containers then three); `make chaos`
(LOGWHEEL_CHAOS_FULL=1) feeds 20,000 lines through three, then four."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.integration.test_instance_id import transactional_ids
from tests.support import Wordcount
from tests.support_containers import Container, build_image, missing

FULL = os.environ.get("LOGWHEEL_CHAOS_FULL") == "1"
LINES = 20_000 if FULL else 1_000  # at least; more while the scale-up is under way
BATCH = 400 if FULL else 100
COUNTERS = 3 if FULL else 2
GRACE = 15  # docker-compose.yml's stop_grace_period: SIGTERM commits and leaves within 10 s

pytestmark = [
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
    pytest.mark.timeout(1800 if FULL else 600),
]


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


def test_containers_of_one_computation_count_exactly_once_through_a_kill_and_a_scale_up(
    image, kafka, tmp_path
):
    wc = Wordcount(kafka, tmp_path)
    job = tmp_path / f"{wc.unique.module}.py"
    ref = f"{wc.unique.module}:pipeline"

    def container(role: str, i: int) -> Container:
        args = ["run", ref, "--computation", role]
        return Container(f"{wc.name}-{role}-{i}", args, job=job, bootstrap=kafka)

    split = container("split-words", 0)
    counters = [container("count-words", i) for i in range(COUNTERS)]
    started = [split, *counters]
    fed, scaled = threading.Event(), threading.Event()

    def feed() -> None:
        """Batches every 0.1 s, until LINES and the scale-up are done: the kill and the new
        member's rebalance land while work is in flight."""
        while wc.sent < LINES or not scaled.is_set():
            wc.send_lines(BATCH)
            fed.set()
            time.sleep(0.1)

    try:
        wc.send_lines(BATCH)
        for c in started:
            c.start()
        for c in started:
            c.wait_working()
        feeding = threading.Thread(target=feed, daemon=True)
        feeding.start()
        for _ in range(3):  # a few batches in: the kill lands between hooks and a commit
            fed.clear()
            assert fed.wait(30), "the feeder is stuck"
        time.sleep(0.05)
        victim = counters[0]
        victim.kill()
        assert not victim.running()
        added = container("count-words", COUNTERS)  # the scale-up
        started.append(added)
        added.start()
        victim.start()  # a new container of the same name, on a new /state volume
        added.wait_working()
        victim.wait_working()  # its name is the member's: it takes its partitions back
        scaled.set()
        feeding.join()
        wc.check_exact(wc.read_counts(timeout=300))

        group = f"{wc.name}.count-words"
        names = {f"{group}.{c.name}" for c in [*counters, added]}
        assert transactional_ids(kafka, group) == names, "an id not taken from a name"

        took = counters[1].stop(GRACE)
        # 0, not 137: it left on SIGTERM, before podman's SIGKILL at the end of the grace
        assert counters[1].exit_code() == 0, counters[1].logs()[-3000:]
        print(f"podman stop took {took:.1f}s")
    finally:
        scaled.set()
        for c in started:
            c.remove()
