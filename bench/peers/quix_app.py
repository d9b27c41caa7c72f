"""What the Quix Streams programs of the benchmarks share (they run in Quix's virtualenv and
import nothing of logwheel's): their command line, and the Application configured as Quix's
docs recommend (`processing_guarantee`, defaults otherwise) but for read_committed input, so
the benchmarks' gated input stays invisible until it is committed, as for logwheel."""

from __future__ import annotations

import argparse

from quixstreams import Application


def application(description: str, **options: str) -> tuple[Application, argparse.Namespace]:
    """The Application of `--bootstrap --group --state-dir --guarantee`, and the arguments
    (`--input` and `--output` too, and an optional `--NAME` for each of `options`, whose
    value is its default)."""
    parser = argparse.ArgumentParser(description=description)
    for name in ("bootstrap", "input", "output", "group", "state-dir", "guarantee"):
        parser.add_argument(f"--{name}", required=True)
    for name, default in options.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=default)
    args = parser.parse_args()
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        state_dir=args.state_dir,
        consumer_extra_config={"isolation.level": "read_committed"},
    )
    return app, args
