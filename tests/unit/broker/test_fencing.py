"""When a separated broker may stop and restart around its controller's fence (no JVM: the
clock is a fake one that sleeps at once)."""

from __future__ import annotations

import pytest

from framework.broker import fencing
from framework.broker.fencing import Fencing
from framework.broker.roles import broker_role

FAST = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "500"}


class Clock:
    """Wall and monotonic time in one, moved on by `sleep` alone."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    monotonic = time

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(fencing, "time", clock)
    return clock


def _fencing(home, settings=None, registered=True) -> Fencing:
    home.mkdir(parents=True, exist_ok=True)
    role = broker_role(home)
    if registered:
        role.data_dir.mkdir()
        (role.data_dir / "meta.properties").write_text("cluster.id=x\nnode.id=1\n")
    return Fencing(home, role, dict(settings or {}))


def test_a_separated_brokers_stop_ends_its_jvm_before_the_controller_can_fence_it(tmp_path):
    """A broker fenced while its JVM still shuts down leaves transactions hanging: it is killed
    one heartbeat and a margin before its session can expire, never later than asked, and never
    with less than the margin to shut down in."""
    assert Fencing(tmp_path, broker_role(tmp_path), FAST).stop_timeout() == 1.0
    assert Fencing(tmp_path, broker_role(tmp_path), {}).stop_timeout() == 6.5
    assert Fencing(tmp_path, broker_role(tmp_path), {}).stop_timeout(2.0) == 2.0
    brief = {"broker.session.timeout.ms": "1000", "broker.heartbeat.interval.ms": "800"}
    assert Fencing(tmp_path, broker_role(tmp_path), brief).stop_timeout() == 0.5


def test_a_restart_waits_one_session_and_a_margin_from_when_our_stop_ended_the_broker(
    tmp_path, clock
):
    node = _fencing(tmp_path / "b")
    node.went_down()
    clock.now += 3.0
    said = []
    node.await_fence(None, 60.0, said.append)
    assert clock.slept == [9.0 + 1.0 - 3.0]  # the default 9 s session and a 1 s margin
    assert said == ["waiting 7.0s for the controller to fence the broker's last incarnation"]


def test_a_broker_down_for_longer_than_a_session_restarts_at_once(tmp_path, clock):
    node = _fencing(tmp_path / "b", FAST)
    node.went_down()
    clock.now += 3.5
    said = []
    node.await_fence(None, 60.0, said.append)
    assert clock.slept == [] and said == []


def test_a_broker_that_ended_otherwise_counts_as_alive_until_now(tmp_path, clock):
    """Neither our stop nor our kill ended it (or a new incarnation ran since): it may have
    heartbeated until this moment."""
    never_stopped = _fencing(tmp_path / "a", FAST)
    never_stopped.await_fence(None, 60.0, lambda _: None)
    assert clock.slept == [3.0]
    restarted = _fencing(tmp_path / "b", FAST)
    restarted.went_down()
    clock.now += 60.0
    restarted.came_up()
    restarted.await_fence(None, 60.0, lambda _: None)
    assert clock.slept == [3.0, 3.0]


def test_a_broker_that_never_registered_has_no_incarnation_to_fence(tmp_path, clock):
    node = _fencing(tmp_path / "b", registered=False)
    node.await_fence(None, 60.0, lambda _: None)
    assert clock.slept == []


def test_a_controller_started_just_now_gives_the_broker_a_session_from_when_it_answers(
    tmp_path, clock, monkeypatch
):
    """The broker went down long ago, but the new controller does not know that: it counts a
    whole session from its own start. Its port is polled for `timeout` s at most."""
    answers = iter([False, False, True])
    monkeypatch.setattr(fencing, "accepts", lambda port: next(answers))
    node = _fencing(tmp_path / "b", FAST)
    node.went_down()
    clock.now += 600.0
    node.await_fence(19093, 60.0, lambda _: None)
    assert clock.slept == [0.1, 0.1, 3.0]
    monkeypatch.setattr(fencing, "accepts", lambda port: False)
    clock.slept.clear()
    node.await_fence(19093, 1.0, lambda _: None)
    *polls, fence = clock.slept
    assert 1.0 <= sum(polls) < 1.2 and fence == 3.0
