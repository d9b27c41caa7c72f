"""`logwheel acls`: print or create the least-privilege ACLs of a pipeline's parts."""

from __future__ import annotations

import argparse
import os
import socket

from framework.ops import acls as acls_module
from framework.ops.acls import create_acls, part_acls, pipeline_acls


def register_acls(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "acls",
        help="the least-privilege ACLs of a pipeline's parts (computations, sinks, injectors, "
        "the queries of its state): print them, or --create them",
        description=acls_module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("pipeline", metavar="MODULE:ATTR")
    parser.add_argument(
        "--principal",
        required=True,
        help="e.g. User:job; with {name} in it, each part its own (User:{name}; the queries of "
        "the pipeline's state are the part named 'queries')",
    )
    parser.add_argument(
        "--part",
        "--computation",
        "--sink",
        "--injector",
        dest="parts",
        action="append",
        default=[],
        metavar="NAME",
        help="only this part's ACLs (a computation, sink, injector, or 'queries'; repeatable)",
    )
    parser.add_argument(
        "--host",
        help="the address the principal connects from ('*': any); default: this machine's "
        "address towards the bootstrap servers",
    )
    parser.add_argument(
        "--allow-reset",
        "--reset",
        dest="allow_reset",
        action="store_true",
        help="also DELETE on its own topics, which `logwheel reset --wipe-state` needs",
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
    from framework.broker.bootstrap import bootstrap_from
    from framework.errors import ConfigurationError
    from framework.streaming.loading import kafka_settings, load_pipeline

    if ":" not in args.principal:
        raise ConfigurationError(
            f"--principal {args.principal!r}: give TYPE:NAME, e.g. User:job (a SCRAM user)"
        )
    pipeline = load_pipeline(args.pipeline)
    bootstrap = bootstrap_from(args.bootstrap) if args.create else _named_bootstrap(args)
    host = args.host or local_address(bootstrap)
    parts = args.parts
    if not parts and "{name}" in args.principal:
        parts = [part.name for part in pipeline.parts()]
    acls = set()
    for name in parts:
        principal = args.principal.replace("{name}", name)
        acls |= set(part_acls(pipeline, name, principal, host=host, allow_reset=args.allow_reset))
    if not parts:
        acls = set(pipeline_acls(pipeline, args.principal, reset=args.allow_reset, host=host))
    if args.create:
        create_acls(sorted(acls), bootstrap, kafka_settings(args.config))
    verb = "created" if args.create else "needs"
    for acl in sorted(acls):
        print(f"{verb:7} {acl}")
    return 0


def _named_bootstrap(args: argparse.Namespace) -> str | None:
    return args.bootstrap or os.environ.get("LOGWHEEL_BOOTSTRAP")


def local_address(bootstrap: str | None) -> str:
    """The address this machine reaches the first bootstrap server from (127.0.0.1 for a
    local or unknown one): the job's network, as a broker sees it, not `*`."""
    if not bootstrap:
        return "127.0.0.1"
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host.strip("[]") or "127.0.0.1", int(port or 9092)))
            return probe.getsockname()[0]
    except (OSError, ValueError):
        return "127.0.0.1"
