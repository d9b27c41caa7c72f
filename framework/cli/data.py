"""The commands that read what a pipeline keeps: `changelog dump|follow`, `schemas`."""

from __future__ import annotations

import argparse
import sys

from framework.broker.bootstrap import bootstrap_from
from framework.cli.options import add_bootstrap
from framework.errors import ConfigurationError


def register_schemas(commands: argparse._SubParsersAction) -> None:
    from framework.serde.schemas import describe_search_path

    parser = commands.add_parser(
        "schemas",
        help="the record types on the schema search path and their versions (history/)",
        description=describe_search_path(),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="fail when a version breaks backward or forward compatibility",
        description="Every version of every type against the one before it, both ways; with "
        "--registry, every type also against the latest version of each registry subject "
        "holding a record of the same full name, under the subject's compatibility level "
        "(NONE or none set: both ways).",
    )
    check.add_argument(
        "--registry",
        metavar="URL",
        help="also check against this Schema Registry's latest versions "
        "(default: $LOGWHEEL_SCHEMA_REGISTRY, if set)",
    )
    check.set_defaults(func=schemas_check)
    dump = actions.add_parser(
        "dump", help="print logwheel's own record types (marks, timer entries) as Avro JSON"
    )
    dump.add_argument("name", nargs="?", metavar="NAME", help="one type, e.g. logwheel.Watermark")
    dump.set_defaults(func=schemas_dump)


def schemas_check(args: argparse.Namespace) -> int:
    """Every version of every type against the one before it, both ways (Avro resolution),
    and against a registry's latest versions with --registry (kafka/registry_compat.py)."""
    from framework.kafka.registry_settings import at_url
    from framework.serde.catalogue import load_schemas
    from framework.serde.compat import check

    schemas = load_schemas()
    registry = at_url(args.registry)
    verdict = None
    if registry is not None:  # asked first: a registry that does not answer fails in one line
        from framework.kafka.registry_compat import check_against_registry

        verdict = check_against_registry(schemas, registry)
    problems = check(schemas)
    for problem in [*problems, *(verdict.problems if verdict else ())]:
        print(f"logwheel schemas check: {problem}", file=sys.stderr)
    versions = sum(len(v) for v in schemas.history.values()) + len(schemas)
    summary = f"{len(problems)} incompatible change(s)" if problems else "all compatible"
    where = ", ".join(str(d) for d in schemas.directories)
    print(f"schemas: {len(schemas)} types, {versions} versions in {where}: {summary}")
    if verdict is not None:
        print(verdict.line(len(schemas)))
    return 1 if problems or (verdict and verdict.problems) else 0


def schemas_dump(args: argparse.Namespace) -> int:
    """logwheel's own types as the files that define them, so other tools can decode marks
    and timer journal entries."""
    import json

    from framework.serde.schemas import own_schemas

    files = {
        f.name.removesuffix(".avsc"): f for f in own_schemas().iterdir() if f.name.endswith(".avsc")
    }
    if args.name is not None and args.name not in files:
        raise ConfigurationError(
            f"logwheel has no record type {args.name!r}: it has {', '.join(sorted(files))}"
        )
    for name in [args.name] if args.name else sorted(files):
        print(json.dumps(json.loads(files[name].read_text(encoding="utf-8")), indent=2))
    return 0


def register_changelog(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("changelog", help="print a changelog topic as JSON lines")
    parser.add_argument("action", choices=["dump", "follow"])
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument(
        "--spark", action="store_true", help="dump through Spark (changelog.spark.read_snapshot)"
    )
    parser.add_argument("--master", default="local[*]", help="Spark master with --spark")
    parser.add_argument(
        "--registry",
        metavar="URL",
        help="Schema Registry of values in the Confluent wire format (else "
        "LOGWHEEL_SCHEMA_REGISTRY)",
    )
    add_bootstrap(parser)
    parser.set_defaults(func=changelog_command)


def changelog_command(args: argparse.Namespace) -> int:
    """`dump`: the latest value per key; `follow`: then every change, live, until Ctrl-C."""
    import json

    from changelog import ChangelogTable
    from framework.streaming.loading import kafka_settings, spark_settings

    bootstrap = bootstrap_from(args.bootstrap)
    if args.spark:
        if args.action != "dump":
            raise ConfigurationError("--spark reads a snapshot: use it with dump, not follow")
        from changelog.spark import read_snapshot
        from framework.backfill.session import session

        spark = session(args.master, "logwheel-changelog-dump", spark_settings(args.config))
        try:
            snapshot = read_snapshot(
                spark,
                args.topic,
                bootstrap=bootstrap,
                kafka=kafka_settings(args.config),
                registry=args.registry,
            )
            for row in snapshot.toLocalIterator():
                print(json.dumps({"key": row["key"], "value": json.loads(row["value"])}))
        finally:
            spark.stop()
        return 0
    kafka = kafka_settings(args.config)
    with ChangelogTable(args.topic, bootstrap=bootstrap, kafka=kafka, registry=args.registry) as t:
        t.catch_up(progress=sys.stderr.isatty())
        if args.action == "dump":
            for key, value in t.items():
                print(json.dumps({"key": key, "value": value}, default=str), flush=False)
            return 0
        for key, old, new in t.follow():
            print(json.dumps({"key": key, "old": old, "new": new}, default=str), flush=True)
    return 0
