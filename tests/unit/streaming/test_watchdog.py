"""The watchdog's rules, looked at with a clock the test moves (its thread is not started):
a hook call past its bound is remembered, counted and interrupted, then the process started
again if it does not return; only awake time counts; a main thread that makes no progress
outside hooks is treated alike. What the real signal, the dead-man switch and the restart in
place do to a real process: the tests at the end, each in a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Message
from prometheus_client import REGISTRY

from framework import Computation, Pipeline
from framework.core.api import Timer
from framework.errors import Abandoned
from framework.streaming.calls import Calls, CallSlot, DurableCalls
from framework.streaming.dead_man import DUMP
from framework.streaming.hung_calls import HungCalls
from framework.streaming.watchdog import SLOT, Bounds, Watchdog, start_watchdog
from tests.support import REPO


class Noop(Computation):
    def process_record(self, ctx, record):
        pass


SPEC = (
    Pipeline("p")
    .source("in")
    .computation("c", Noop, inputs={"in": None}, hook_timeout_ms=2000)["c"]
)


def _count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Dog:
    """A watchdog of SPEC (hook 2 s, margin 5 s, stall 30 s: it looks every 0.25 s) whose
    interruptions and restarts are written down, looked at every `step` s of the clock."""

    def __init__(self, tmp_path: Path, stall_s: float = 30.0) -> None:
        self.clock, self.calls = Clock(), Calls()
        self.hung = HungCalls(tmp_path)
        self.interrupted, self.restarted = 0, 0
        self.dog = Watchdog(
            SPEC,
            self.calls,
            self.hung,
            Bounds(2.0, 5.0, stall_s),
            interrupt=self._interrupt,
            restart=self._restart,
            clock=self.clock,
        )

    def _interrupt(self) -> None:
        self.interrupted += 1

    def _restart(self) -> None:
        self.restarted += 1

    def run(self, seconds: float, step: float = 0.25) -> None:
        for _ in range(round(seconds / step)):
            self.clock.now += step
            self.dog.check()


def _msg(offset: int) -> Message:
    return Message(topic="in", partition=0, offset=offset, value=b"v")


def test_a_hook_call_past_its_bound_is_remembered_counted_and_interrupted_once(tmp_path, caplog):
    dog = Dog(tmp_path)
    before = _count("logwheel_hook_timeouts_total", computation="c")
    dog.calls.calling = _msg(7)
    dog.run(1.75)
    assert dog.interrupted == 0 and not dog.hung
    with caplog.at_level("ERROR"):
        dog.run(0.5)
    assert dog.interrupted == 1
    assert "ran past hook_timeout_ms=2000" in dog.hung.records()[("in", 0, 7)]
    assert HungCalls(tmp_path).records() == dog.hung.records()  # on disk already
    assert _count("logwheel_hook_timeouts_total", computation="c") == before + 1
    assert "the hook call on record in[0]@7 ran past hook_timeout_ms=2000" in caplog.text
    dog.run(1.0)
    assert dog.interrupted == 1 and dog.restarted == 0  # once; the margin has not passed


def test_calls_that_each_end_in_time_are_never_interrupted(tmp_path):
    dog = Dog(tmp_path)
    for offset in range(40):  # 40 calls of 1.5 s in a row: 60 s in hooks, none past 2 s
        dog.calls.calling = _msg(offset)
        dog.run(1.5)
    dog.calls.calling = None
    assert dog.interrupted == 0 and not dog.hung


def test_a_call_still_running_a_margin_after_its_interruption_restarts_the_process(tmp_path):
    dog = Dog(tmp_path)
    dog.calls.calling = _msg(3)
    dog.run(2.0 + 4.75)
    assert (dog.interrupted, dog.restarted) == (1, 0)
    dog.run(0.5)
    assert (dog.interrupted, dog.restarted) == (1, 1)


def test_a_call_that_returns_after_its_interruption_is_not_restarted(tmp_path):
    dog = Dog(tmp_path)
    dog.calls.calling = _msg(3)
    dog.run(2.5)
    dog.calls.calling = _msg(4)  # the handler raised (or the call returned): the next one
    dog.run(1.0)
    dog.calls.calling = None
    dog.run(10)
    assert (dog.interrupted, dog.restarted) == (1, 0)


def test_only_time_the_watchdog_was_awake_to_see_counts(tmp_path):
    """A process stopped (SIGSTOP) or starved of CPU for minutes wakes its watchdog once, late:
    that gap counts as two looks at most, or every call it stopped in would time out."""
    dog = Dog(tmp_path)
    dog.calls.calling = _msg(1)
    dog.run(0.25)
    dog.clock.now += 600
    dog.dog.check()
    assert dog.interrupted == 0
    dog.run(1.5)
    assert dog.interrupted == 1


def test_a_timer_call_is_named_by_its_key_tag_time_and_domain(tmp_path, caplog):
    dog = Dog(tmp_path)
    dog.calls.calling = ("k", Timer(500, "close", "event"))
    with caplog.at_level("ERROR"):
        dog.run(2.25)
    assert dog.interrupted == 1
    assert list(dog.hung.timers()) == [("k", "close", "event")]  # a timer is its key and tag
    assert "timer 'close' of key 'k' at 500 (event time)" in caplog.text


def test_a_main_thread_without_progress_outside_hooks_is_interrupted_then_restarted(
    tmp_path, caplog
):
    dog = Dog(tmp_path, stall_s=30.0)
    for _ in range(200):  # rounds of the loop: progress, however long it runs
        dog.calls.rounds += 1
        dog.run(0.25)
    assert dog.interrupted == 0
    with caplog.at_level("ERROR"):
        dog.run(30.25)
    assert dog.interrupted == 1 and not dog.hung  # no record is to blame
    assert "the main thread made no progress for 30 s, in " in caplog.text
    dog.run(5.0)
    assert dog.restarted == 1


def test_the_signal_raises_only_in_the_call_it_was_sent_for(tmp_path):
    dog = Dog(tmp_path)
    first = _msg(1)
    dog.calls.calling = first
    dog.run(2.25)
    dog.calls.calling = _msg(2)  # it returned before the handler ran
    dog.dog.on_signal(0, None)
    dog.calls.calling = first
    dog.dog.on_signal(0, None)  # the signal was spent: nothing
    dog2 = Dog(tmp_path)
    dog2.calls.calling = first
    dog2.run(2.25)
    with pytest.raises(Abandoned, match=r"hook call on record in\[0\]@1 past 2000 ms"):
        dog2.dog.on_signal(0, None)
    assert not isinstance(Abandoned("x"), Exception)  # no `except Exception` keeps it


def test_remembered_calls_persist_until_settled_and_a_broken_file_is_ignored(tmp_path, caplog):
    hung = HungCalls(tmp_path)
    hung.add(("record", "in", 0, 5), "r1")
    hung.add(("record", "in", 1, 9), "r2")
    hung.add(("timer", "k", "t", 7, "event"), "t1")
    again = HungCalls(tmp_path)
    assert again.records() == {("in", 0, 5): "r1", ("in", 1, 9): "r2"}
    assert again.timers() == {("k", "t", "event"): "t1"}
    again.passed({("in", 0): 6, ("in", 1): 9})  # in[1]@9 is not committed past yet
    again.settle_timer("k", "t", "event")
    assert HungCalls(tmp_path).records() == {("in", 1, 9): "r2"}
    assert not HungCalls(tmp_path).timers()
    (tmp_path / "hung-calls.json").write_text('[{"call": ["record", "in", "x", 1]}, ')
    with caplog.at_level("WARNING"):
        assert not HungCalls(tmp_path)
    assert "cannot be read" in caplog.text
    (tmp_path / "hung-calls.json").write_text(json.dumps([{"call": ["record", 1], "reason": ""}]))
    assert not HungCalls(tmp_path)  # a wrong shape is dropped, not trusted


def test_durable_calls_leave_the_call_in_progress_on_disk(tmp_path):
    calls = DurableCalls(CallSlot(tmp_path / SLOT))
    calls.calling = _msg(12)
    assert CallSlot.read(tmp_path / SLOT) == ("record", "in", 0, 12)
    calls.calling = ("k", Timer(3, "t", "processing"))
    assert CallSlot.read(tmp_path / SLOT) == ("timer", "k", "t", 3, "processing")
    calls.calling = None
    assert CallSlot.read(tmp_path / SLOT) is None and calls.calling is None


def test_a_death_by_the_dead_man_switch_names_its_call_or_makes_the_next_calls_durable(tmp_path):
    (tmp_path / DUMP).write_text("Timeout (0:00:12)!\nThread 0x1 (most recent call first):\n")
    watchdog = start_watchdog(SPEC, tmp_path)  # no slot: not known
    watchdog.close()
    assert isinstance(watchdog.calls, DurableCalls) and not watchdog.hung
    # that process wrote its calls down; the second death is the switch's again
    CallSlot(tmp_path / SLOT).write(_msg(42))
    (tmp_path / DUMP).write_text("Timeout (0:00:12)!\n")
    watchdog = start_watchdog(SPEC, tmp_path)
    watchdog.close()
    assert not isinstance(watchdog.calls, DurableCalls)
    assert "held the GIL" in watchdog.hung.records()[("in", 0, 42)]
    assert not (tmp_path / SLOT).exists() and (tmp_path / DUMP).read_text() == ""
    watchdog = start_watchdog(SPEC, tmp_path)  # dealt with: no death now
    watchdog.close()
    assert not isinstance(watchdog.calls, DurableCalls)


# -- in processes of their own ------------------------------------------------------------

SCENARIO = """
import ctypes, os, signal, sys, time, threading
from pathlib import Path
from confluent_kafka import Message
from framework import Computation, Pipeline
from framework.errors import Abandoned
from framework.streaming import watchdog
from framework.streaming.watchdog import start_watchdog

class Noop(Computation):
    def process_record(self, ctx, record): pass

watchdog.DEAD_MAN_MIN_S = 2.0  # the test's machine is not that loaded: 0.5 + 2 margins of 1 s
spec = Pipeline("p").source("in").computation(
    "c", Noop, inputs={"in": None}, hook_timeout_ms=500)["c"]
home = Path(sys.argv[2])
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())  # as `logwheel run` does
dog = start_watchdog(spec, home, stop)
print("start", os.getpid(), flush=True)
if (home / "second").exists():
    print("again", sorted(dog.hung.records()), "fd 100 open:", os.path.exists("/proc/self/fd/100"))
    sys.exit(0)
(home / "second").touch()
r, w = os.pipe()
os.dup2(r, 100)  # inheritable, as a library's descriptors may be
dog.calls.calling = Message(topic="in", partition=0, offset=int(sys.argv[3]), value=b"")
print("hooked", flush=True)
try:
    {hook}
except Abandoned as why:
    print("abandoned:", why, flush=True)
"""


def _start(tmp_path: Path, hook: str, offset: int = 5) -> subprocess.Popen:
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO.replace("{hook}", hook))
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(script), "x", str(home), str(offset)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _scenario(tmp_path: Path, hook: str, offset: int = 5, timeout: float = 60):
    process = _start(tmp_path, hook, offset)
    out, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


MUTEX = "m = ctypes.create_string_buffer(64); lib = ctypes.CDLL(None)\n"
MUTEX += "    lib.pthread_mutex_lock(m); lib.pthread_mutex_lock(m)"


def test_a_hook_asleep_is_interrupted_in_place(tmp_path):
    done = _scenario(tmp_path, "time.sleep(10**6)")
    assert done.returncode == 0, done.stderr
    assert "abandoned: hook call on record in[0]@5 past 500 ms" in done.stdout


def test_a_hook_in_a_wait_no_signal_ends_starts_its_process_again_in_place(tmp_path):
    """pthread_mutex_lock on a mutex the thread holds never returns and is not interrupted by
    signals (a C library's own wait does the same); the GIL is released, so the watchdog
    starts the process again in place: same pid, the call remembered, no fd of the old image
    but standard input and output."""
    done = _scenario(tmp_path, MUTEX, offset=8)
    assert done.returncode == 0, done.stderr
    starts = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("start")]
    assert len(starts) == 2 and starts[0] == starts[1], done.stdout  # one pid, two images
    again = done.stdout.split("again ", 1)[1]
    assert again.strip() == "[('in', 0, 8)] fd 100 open: False", done.stdout
    assert "the hook call on record in[0]@8 is still running 1 s after" in done.stderr


def test_a_process_asked_to_stop_while_stuck_ends_instead_of_starting_again(tmp_path):
    """SIGTERM to a process whose main thread waits where no signal ends it: its Python
    handler never runs (the main thread runs those), yet the watchdog reads the signal from
    the interpreter's wakeup fd and ends the process when it would have started it again."""
    process = _start(tmp_path, MUTEX)
    assert process.stdout.readline().startswith("start")
    assert process.stdout.readline() == "hooked\n"
    time.sleep(0.2)  # in the wait by now: a bound the test's own speed cannot break
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "asked to stop: ending the process instead" in err and "start" not in out


def test_a_hook_holding_the_gil_is_ended_by_the_dead_man_switch(tmp_path):
    """The same wait through ctypes.PyDLL keeps the GIL: no Python thread runs, the watchdog's
    neither. The switch dumps the stacks into the state dir and ends the process (status 1)."""
    hook = "m = ctypes.create_string_buffer(64); lib = ctypes.PyDLL(None)\n"
    hook += "    lib.pthread_mutex_lock(m); lib.pthread_mutex_lock(m)"
    started = time.monotonic()
    done = _scenario(tmp_path, hook)
    assert done.returncode == 1, done.stderr
    dump = (tmp_path / "home" / DUMP).read_text()
    assert "Timeout" in dump and "scenario.py" in dump
    assert time.monotonic() - started >= 2.5  # hook_timeout_ms + 2 margins


def test_the_watchdog_thread_is_a_daemon_that_close_ends(tmp_path):
    watchdog = start_watchdog(SPEC, tmp_path)
    thread = [t for t in threading.enumerate() if t.name == "p.c.watchdog"][0]
    assert thread.daemon
    watchdog.close()
    assert not thread.is_alive()
