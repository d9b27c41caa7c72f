"""The peers logwheel is measured against, each in a virtualenv or build of its own that this
module creates under .logwheel/bench/ (git-ignored), pinned, so that their dependencies never
meet logwheel's: `python(peer)` is the interpreter a Python peer's program runs under;
`kafka_streams()` builds bench/kafka-streams (Maven, kafka-streams pinned in its pom).

Peers are measured only when asked (`--peers`, or LOGWHEEL_BENCH_PEERS=1 for make test):
creating a virtualenv needs the package index and a minute.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

from tests.support import maven_classpath

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent / ".logwheel" / "bench"
PINS = {
    "quix": ["quixstreams==3.28.1"],
    "plots": ["matplotlib==3.11.2"],  # bench/plots.py: PNGs, never a logwheel dependency
    "faust": ["faust-streaming==0.15.3", "rocksdict==0.3.29", "cramjam==2.11.0"],  # lz4 inputs
}
"""Each peer's packages, pinned (the newest release when the benchmark was written)."""
PROGRAMS = {
    "quix": BENCH / "peers" / "quix_count_words.py",
    "faust": BENCH / "peers" / "faust_count_words.py",
}


def wanted() -> bool:
    """Whether peers are measured by default (LOGWHEEL_BENCH_PEERS=1)."""
    return os.environ.get("LOGWHEEL_BENCH_PEERS", "") not in ("", "0")


def add_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--peers`: also measure `what`, default LOGWHEEL_BENCH_PEERS."""
    parser.add_argument(
        "--peers",
        action="store_true",
        default=wanted(),
        help=f"{what} (default: LOGWHEEL_BENCH_PEERS)",
    )


def python(peer: str) -> Path:
    """The interpreter of `peer`'s virtualenv, created and installed on first use; a
    virtualenv whose pins changed is reinstalled (the pins are kept beside it)."""
    home = ROOT / peer
    interpreter, stamp = home / "bin" / "python", home / "pins.txt"
    pins = "\n".join(PINS[peer]) + "\n"
    if stamp.exists() and stamp.read_text() == pins and interpreter.exists():
        return interpreter
    print(f"peers: creating {home} with {' '.join(PINS[peer])}", flush=True)
    venv.EnvBuilder(clear=True, with_pip=True).create(home)
    subprocess.run(
        [str(interpreter), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + PINS[peer],
        check=True,
        stdout=sys.stderr,
    )
    stamp.write_text(pins)
    return interpreter


def kafka_streams(main: str = "CountWords") -> list[str]:
    """The java command (less its arguments) of bench/kafka-streams' `main` class (CountWords,
    JoinOrders), built with Maven first when a source is newer than the jar."""
    jar = ROOT / "kafka-streams" / "kafka-streams-count-words-1.jar"
    classpath = maven_classpath(BENCH / "kafka-streams", jar)
    return ["java", "-cp", classpath, f"logwheel.bench.{main}"]


def command(peer: str, program: Path | None = None, **options: str) -> list[str]:
    """The command line of `peer`'s CountWords program (or `program`, run by the peer's
    interpreter) with `--NAME VALUE` options (Kafka Streams': the values alone, in order)."""
    if peer == "kafka-streams":
        return kafka_streams() + list(options.values())
    args = [str(python(peer)), str(program or PROGRAMS[peer])]
    for name, value in options.items():
        args += [f"--{name.replace('_', '-')}", value]
    return args
