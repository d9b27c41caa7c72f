"""`logwheel jars kafka|spark|registry [--into DIR]`: where a JVM part's jars are, fetched (the
registry's built) if need be, for an image build or a machine that is offline later;
`make jars` fills the checkout's."""

from __future__ import annotations

import argparse
from pathlib import Path

from framework.backfill.session import spark_version
from framework.jvm.jars import (
    KAFKA,
    REGISTRY,
    SPARK,
    fetch,
    kafka_jars,
    registry_jar,
    spark_jars,
)


def register_jars(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "jars",
        help="where the broker's, Spark's Kafka connector's or the Schema Registry's jars are, "
        "fetching or building them if need be",
        description=__doc__,
    )
    parser.add_argument("part", choices=["kafka", "spark", "registry"])
    parser.add_argument("--into", type=Path, help="fetch into this directory instead")
    parser.set_defaults(func=jars_command)


def jars_command(args: argparse.Namespace) -> int:
    if args.part == "kafka":
        print(fetch(KAFKA, args.into, {}) if args.into else kafka_jars())
        return 0
    if args.part == "registry":
        print(fetch(REGISTRY, args.into, {}) if args.into else registry_jar().parent)
        return 0
    version = spark_version()  # the connector must match the installed pyspark
    if args.into:
        print(fetch(SPARK, args.into, {"spark.version": version}))
    else:
        print(spark_jars(version)[0].parent)
    return 0
