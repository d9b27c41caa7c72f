"""`logwheel dlq ls|replay`: a part's dead letters (a computation's, a sink's), counted, and a
computation's sent back after a fix (framework/ops/dead_letter_counts.py,
framework/ops/replay.py)."""

from __future__ import annotations

import argparse
import json

from framework.broker.bootstrap import bootstrap_from
from framework.cli.options import add_bootstrap


def register_dlq(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "dlq",
        help="list a computation's dead letters, or replay them after a fix",
        description=__doc__,
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    ls = verbs.add_parser(
        "ls",
        help="dead letters by stage and reason, how many are replayed, the newest few",
    )
    ls.add_argument("pipeline", metavar="MODULE:ATTR")
    ls.add_argument(
        "--computation", "--part", required=True, metavar="NAME", help="or a sink's name"
    )
    ls.add_argument("--json", action="store_true", help="one JSON object")
    ls.add_argument("--newest", type=int, default=5, metavar="N", help="show the N newest (5)")
    add_bootstrap(ls)
    ls.set_defaults(func=list_dead_letters)

    rp = verbs.add_parser(
        "replay",
        help="send matching dead letters not yet replayed back to the computation, each once",
        description=replay_dead_letters.__doc__,
    )
    rp.add_argument("pipeline", metavar="MODULE:ATTR")
    rp.add_argument("--computation", required=True, metavar="NAME")
    rp.add_argument("--stage", metavar="S", help="only dead letters of this stage")
    rp.add_argument("--reason", metavar="TEXT", help="only those whose reason contains TEXT")
    rp.add_argument(
        "--since", metavar="ISO-DATETIME", help="only those stamped at or after this time"
    )
    rp.add_argument("--until", metavar="ISO-DATETIME", help="only those stamped before this time")
    rp.add_argument("--dry-run", action="store_true", help="say what would be sent; send nothing")
    rp.add_argument("--rate", type=float, metavar="N", help="at most N dead letters a second")
    add_bootstrap(rp)
    rp.set_defaults(func=replay_dead_letters)


def list_dead_letters(args: argparse.Namespace) -> int:
    """Counts of a part's dead letters by stage and reason."""
    from rich.console import Console
    from rich.table import Table

    from framework.ops.dead_letter_counts import dead_letter_summary
    from framework.streaming.loading import kafka_settings, load_pipeline

    pipeline = load_pipeline(args.pipeline)
    bootstrap = bootstrap_from(args.bootstrap)
    summary = dead_letter_summary(
        pipeline, args.computation, bootstrap, kafka_settings(args.config), args.newest
    )
    if args.json:
        print(json.dumps(summary.as_json()))
        return 0
    console = Console(width=160)
    console.print(
        f"{summary.topic}: {summary.total} dead letters, {summary.replayed} replayed",
        highlight=False,
    )
    if not summary.total:
        return 0
    counts = Table("stage", "reason", "count", "replayed")
    for r in summary.reasons:
        counts.add_row(r.stage, r.reason, str(r.count), str(r.replayed))
    console.print(counts)
    newest = Table("dead letter", "stage", "source topic", "partition", "offset", "replayed")
    for d in summary.newest:
        where = ["-" if d[k] is None else str(d[k]) for k in ("source_partition", "source_offset")]
        newest.add_row(d["dead_letter"], d["stage"], d["source_topic"] or "-", *where,
                       "yes" if d["replayed"] else "no")  # fmt: skip
    console.print(newest)
    if summary.total > summary.replayed and pipeline.part(args.computation).replayable:
        console.print(
            f"replay after the fix: logwheel dlq replay {args.pipeline} "
            f"--computation {args.computation}",
            highlight=False,
        )
    return 0


def replay_dead_letters(args: argparse.Namespace) -> int:
    """Sends each matching dead letter not yet replayed back to the computation through
    <pipeline>.<computation>.replay (original key, value, headers, timestamp and id), recording
    it in the compacted <pipeline>.<computation>.replayed in the same transaction: a replay
    killed and run again, or run twice, sends each once. The running computation processes it
    with its current code, never as late."""
    from rich.console import Console
    from rich.progress import Progress

    from framework.kafka.topic_ends import parse_point
    from framework.ops.replay import Selection, replay
    from framework.streaming.loading import kafka_settings, load_pipeline, registry_settings

    pipeline = load_pipeline(args.pipeline)
    selection = Selection(
        args.stage,
        args.reason,
        None if args.since is None else _moment(parse_point, "--since", args.since),
        None if args.until is None else _moment(parse_point, "--until", args.until),
    )
    console = Console(stderr=True)  # a bar at a terminal only; the report goes to stdout
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = None

        def progress(done: int, total: int) -> None:
            nonlocal task
            if task is None:
                task = bar.add_task("replaying", total=total)
            bar.update(task, completed=done)

        report = replay(
            pipeline,
            args.computation,
            bootstrap_from(args.bootstrap),
            selection,
            dry_run=args.dry_run,
            rate=args.rate,
            kafka=kafka_settings(args.config),
            registry=registry_settings(args.config),
            progress=progress,
        )
    for line in report.lines():
        print(line)
    return 0


def _moment(parse, option: str, text: str) -> int:
    """`text` (an ISO date-time with a time zone) in ms; a bad one refused naming `option` (the
    parse's own refusal names --to and offers earliest and latest, which are no times here)."""
    from framework.errors import ConfigurationError

    try:
        point = parse(text)
    except ConfigurationError:
        point = None
    if not isinstance(point, int):
        raise ConfigurationError(
            f"{option} {text!r}: give an ISO date-time with a time zone, like 2026-11-21T12:00:00Z"
        )
    return point
