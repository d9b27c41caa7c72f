"""`logwheel rescale`: move a stopped computation's state to another partition count."""

from __future__ import annotations

import argparse
import logging


def register_rescale(commands: argparse._SubParsersAction) -> None:
    from framework.cli.options import add_bootstrap

    parser = commands.add_parser(
        "rescale",
        help="move a stopped computation's state, timers, ids and pending records to N "
        "partitions (on Spark)",
        description="Runs while the computation is stopped (refused while its group has live "
        "members): moves every key's state, timers and dedup ids and the records pending in "
        "its .by-key topics to N partitions, placed as Kafka's producer places keys, verified "
        "key by key before the old topics are replaced; rebuilds its watermark channel and "
        "sets its group's offsets. Run it again if it was interrupted. Then run the pipeline "
        "declared with partitions=N. An input read by its Kafka key keeps its topic's count.",
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument("--computation", required=True, metavar="NAME")
    parser.add_argument("--partitions", required=True, type=int, metavar="N")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (local[*])")
    parser.add_argument("--dry-run", action="store_true", help="only say what it would do")
    add_bootstrap(parser)
    parser.set_defaults(func=rescale_command)


def rescale_command(args: argparse.Namespace) -> int:
    from framework.broker.bootstrap import bootstrap_from
    from framework.core.logs import setup
    from framework.rescale.command import rescale
    from framework.streaming.loading import kafka_settings, load_pipeline, spark_settings

    setup(None)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    rescale(
        load_pipeline(args.pipeline),
        args.computation,
        args.partitions,
        bootstrap=bootstrap_from(args.bootstrap),
        master=args.master,
        spark_conf=spark_settings(args.config),
        kafka=kafka_settings(args.config),
        dry_run=args.dry_run,
        report=lambda line: print(line, flush=True),
    )
    return 0
