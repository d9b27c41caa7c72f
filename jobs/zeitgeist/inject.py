"""The query generator as an injector: synthetic searches into `queries`, with a low
watermark it can promise because it knows how late its deliveries can be.

    python -m jobs.zeitgeist.inject [--seconds 120] [--speed 8] [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import time

from framework.broker.bootstrap import bootstrap_from
from framework.core.clock import now_ms
from framework.streaming.injector import Injector
from jobs.zeitgeist import INJECTOR, pipeline
from jobs.zeitgeist.generator import MAX_DELAY_MS, first_window, generate


def inject(bootstrap: str, start_ms: int, seconds: int, speed: float, seed: int = 1) -> int:
    """Send `seconds` of generated searches paced at `speed` times real time; returns how
    many. The watermark after each batch is the newest timestamp sent less the generator's
    delivery bound: every later delivery is at most that late."""
    base = first_window(start_ms)
    began = time.monotonic()
    sent, newest = 0, base
    with Injector(pipeline, INJECTOR, bootstrap=bootstrap) as injector:
        for key, value, ts in generate(start_ms, seconds, seed):
            due = began + (ts - base) / 1000 / speed
            if due > time.monotonic():
                injector.advance(newest - MAX_DELAY_MS)
                time.sleep(max(0.0, due - time.monotonic()))
            injector.send("queries", value, key=key, timestamp=ts)
            newest = max(newest, ts)
            sent += 1
        # the end of the input: every window of it is complete, and no later one is
        injector.advance(base + seconds * 1000)
    return sent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120, help="event-time span (120)")
    parser.add_argument("--speed", type=float, default=8.0, help="times real time (8)")
    parser.add_argument("--bootstrap", help="else LOGWHEEL_BOOTSTRAP, else the embedded broker")
    args = parser.parse_args(argv)
    start = now_ms() - args.seconds * 1000
    n = inject(bootstrap_from(args.bootstrap), start, args.seconds, args.speed)
    print(f"sent {n} queries over {args.seconds} s of event time")


if __name__ == "__main__":
    main()
