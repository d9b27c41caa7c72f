"""Running a pipeline's computations: one in this process with the options given, several as
supervised children — each with its options and its own metrics port, and when one fails the
others are stopped and its exit code is the command's. The children here are a stand-in
script; `logwheel run` of a real pipeline: tests/integration/test_supervisor.py."""

from __future__ import annotations

import signal
import sys
import textwrap

import pytest

from framework.core.pipeline import PipelineError
from framework.streaming import supervisor
from framework.streaming.supervisor import run_computations

WORDCOUNT = "jobs.wordcount:pipeline"


@pytest.fixture(autouse=True)
def _keep_signal_handlers(monkeypatch):
    """The supervisor's handlers are for its own process, not the test runner's."""
    monkeypatch.setattr(signal, "signal", lambda sig, handler: None)


def test_one_computation_runs_in_this_process_with_the_options_given(tmp_path, monkeypatch):
    made = []

    class Runner:
        def __init__(self, pipeline, name, **kwargs):
            made.append((pipeline.name, name, kwargs))

        def run(self, stop):
            made.append("ran")

    monkeypatch.setattr(supervisor, "Runner", Runner)
    code = run_computations(
        WORDCOUNT,
        ["count-words"],
        bootstrap="127.0.0.1:1",
        state_dir=tmp_path,
        standby=2,
        instance_id="pod-1",
        commit_interval_ms=50,
    )
    assert code == 0 and made[-1] == "ran"
    assert made[0] == (
        "wordcount",
        "count-words",
        {
            "bootstrap": "127.0.0.1:1",
            "state_dir": tmp_path,
            "kafka": {},
            "registry": None,
            "owns_process": True,  # its watchdog may interrupt and restart it
            "standby": 2,
            "instance_id": "pod-1",
            "commit_interval_ms": 50,
        },
    )


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"standby": -1}, "--standby -1: give a number of partitions >= 0"),
        ({"commit_interval_ms": 0}, "--commit-interval-ms 0: give milliseconds > 0"),
    ],
)
def test_bad_options_fail_before_anything_runs(tmp_path, monkeypatch, options, says):
    monkeypatch.setattr(supervisor, "Runner", None)  # never reached
    with pytest.raises(PipelineError, match=says):
        run_computations(WORDCOUNT, [], bootstrap="b", state_dir=tmp_path, **options)


CHILD = """\
    import os, signal, sys, time
    args = sys.argv[1:]
    name = args[args.index("--computation") + 1]
    out = os.path.join({out!r}, name)
    with open(out + ".args", "w") as f:
        f.write(" ".join(args))
    if name == "count-words":  # fails, once the other one is up
        while not os.path.exists(os.path.join({out!r}, "split-words.ready")):
            time.sleep(0.01)
        sys.exit(3)
    def stopped(signum, frame):
        open(out + ".end", "w").write("terminated")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stopped)
    open(out + ".ready", "w").close()
    time.sleep(120)  # a liveness bound, should the supervisor never forward the stop
    open(out + ".end", "w").write("never stopped")
"""


def test_a_failing_child_stops_the_others_and_its_exit_code_is_the_commands(tmp_path, monkeypatch):
    child = tmp_path / "child.py"
    child.write_text(f"#!{sys.executable}\n" + textwrap.dedent(CHILD.format(out=str(tmp_path))))
    child.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(child))
    config = tmp_path / "job.toml"
    config.write_text("[kafka]\n")
    code = run_computations(
        WORDCOUNT,
        [],  # every computation: split-words, count-words
        bootstrap="127.0.0.1:1",
        state_dir=tmp_path / "state",
        config_file=str(config),
        standby=1,
        metrics_port=9100,
        instance_id="pod-1",
        commit_interval_ms=50,
        serve="0.0.0.0:8700",
    )
    assert code == 3
    assert (tmp_path / "split-words.end").read_text() == "terminated"
    common = (
        f"-m framework.cli run {WORDCOUNT} --bootstrap 127.0.0.1:1 --state-dir "
        f"{tmp_path / 'state'} --config {config} --commit-interval-ms 50 --standby 1 "
        "--instance-id pod-1 --metrics-addr 127.0.0.1"
    )
    for i, name in enumerate(["split-words", "count-words"]):
        args = (tmp_path / f"{name}.args").read_text()
        serve = f"--serve [0.0.0.0]:{8700 + i}"  # ports as for metrics
        assert args == f"{common} --computation {name} --metrics-port {9100 + i} {serve}"


DEAD_MAN_CHILD = """\
    import os, sys
    args = sys.argv[1:]
    name = args[args.index("--computation") + 1]
    home = os.path.join(args[args.index("--state-dir") + 1], "wordcount", name)
    os.makedirs(home, exist_ok=True)
    starts = os.path.join({out!r}, name + ".starts")
    with open(starts, "a") as f:
        f.write("start\\n")
    if name == "count-words" and open(starts).read().count("start") < 3:
        with open(os.path.join(home, "dead-man.txt"), "w") as f:  # as faulthandler does
            f.write("Timeout (0:00:10)!\\n")
        os._exit(1)
    sys.exit(0)
"""


def test_a_child_ended_by_its_dead_man_switch_is_started_again_with_backoff(tmp_path, monkeypatch):
    """A computation whose hook held the GIL ends by its dead-man switch (exit 1, its stacks
    in its state dir); the job stays up: the child is started again, after 1 s then 2 s, and
    the other computation is left alone. A child that fails otherwise still stops the job
    (test above)."""
    child = tmp_path / "child.py"
    child.write_text(
        f"#!{sys.executable}\n" + textwrap.dedent(DEAD_MAN_CHILD.format(out=str(tmp_path)))
    )
    child.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(child))
    waits = []
    monkeypatch.setattr(supervisor.threading.Event, "wait", lambda self, s: waits.append(s))
    code = run_computations(WORDCOUNT, [], bootstrap="127.0.0.1:1", state_dir=tmp_path / "s")
    assert code == 0
    assert (tmp_path / "count-words.starts").read_text().count("start") == 3
    assert (tmp_path / "split-words.starts").read_text().count("start") == 1
    assert waits == [1.0, 2.0]
