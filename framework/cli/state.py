"""`logwheel state get MODULE:ATTR COMPUTATION KEY`: a key's committed state, as JSON, from the
instance that owns it (framework/query/client.py)."""

from __future__ import annotations

import argparse
import json

from framework.cli.options import add_bootstrap


def register_state(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("state", help="query the state of a running job (--serve)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser(
        "get",
        help="print a key's committed state as JSON",
        description="Prints {key, value, partition, instance, served_by, lag}: the key's "
        "committed state, from the instance that owns it, found through the computation's "
        "group (its instances run with --serve). [serve] in --config: TLS trust, token.",
    )
    get.add_argument("pipeline", metavar="MODULE:ATTR")
    get.add_argument("computation", metavar="COMPUTATION")
    get.add_argument("key", metavar="KEY")
    get.add_argument(
        "--max-lag",
        type=int,
        metavar="N",
        help="a standby at most N changelog records behind may answer",
    )
    get.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="give up after S seconds (30)"
    )
    add_bootstrap(get)
    get.set_defaults(func=state_get)


def state_get(args: argparse.Namespace) -> int:
    from framework.query.client import StateClient
    from framework.streaming.loading import load_pipeline

    pipeline = load_pipeline(args.pipeline)
    with StateClient(
        pipeline, bootstrap=args.bootstrap, config=args.config, deadline_s=args.timeout
    ) as client:
        answer = client.query(args.computation, args.key, args.max_lag)
    print(json.dumps(answer, ensure_ascii=False))
    return 0
