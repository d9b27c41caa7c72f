"""`logwheel acls`: print or create the prefixed ACLs a pipeline's job needs."""

from __future__ import annotations

import argparse

from framework.ops import acls as acls_module
from framework.ops.acls import create_acls, pipeline_acls


def register_acls(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "acls",
        help="the prefixed ACLs a pipeline's job needs: print them, or --create them",
        description=acls_module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument("--principal", required=True, help="e.g. User:job")
    parser.add_argument("--host", default="*", help="the host the principal connects from (*)")
    parser.add_argument(
        "--reset", action="store_true", help="also what `logwheel reset --wipe-state` needs"
    )
    parser.add_argument(
        "--create", action="store_true", help="create them (--config: an administrator's)"
    )
    parser.add_argument(
        "--bootstrap",
        metavar="H:P",
        help="Kafka bootstrap servers with --create (else LOGWHEEL_BOOTSTRAP, else the "
        "embedded broker)",
    )
    parser.add_argument(
        "--config", metavar="FILE.toml", help="client settings from its [kafka] table"
    )
    parser.set_defaults(func=acls_command)


def acls_command(args: argparse.Namespace) -> int:
    from framework.broker.homes import bootstrap_from
    from framework.errors import ConfigurationError
    from framework.streaming.launch import kafka_settings, load_pipeline

    if ":" not in args.principal:
        raise ConfigurationError(
            f"--principal {args.principal!r}: give TYPE:NAME, e.g. User:job (a SCRAM user)"
        )
    acls = pipeline_acls(
        load_pipeline(args.pipeline), args.principal, reset=args.reset, host=args.host
    )
    if args.create:
        create_acls(acls, bootstrap_from(args.bootstrap), kafka_settings(args.config))
    verb = "created" if args.create else "needs"
    for acl in acls:
        print(f"{verb:7} {acl}")
    return 0
