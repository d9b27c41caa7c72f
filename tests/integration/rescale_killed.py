"""`logwheel rescale` in a process of its own that SIGKILLs itself at a named step (`on_step`),
for the test of an interrupted rescale run again: python -m tests.integration.rescale_killed
MODULE:ATTR COMPUTATION PARTITIONS BOOTSTRAP STEP."""

from __future__ import annotations

import os
import signal
import sys

from framework.rescale.command import rescale
from framework.streaming.loading import load_pipeline


def main(ref: str, computation: str, partitions: str, bootstrap: str, step: str) -> None:
    def kill_at(reached: str) -> None:
        if reached == step:
            print(f"killing at {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    rescale(load_pipeline(ref), computation, int(partitions), bootstrap=bootstrap,
            master="local[2]", report=print, on_step=kill_at)  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:])
