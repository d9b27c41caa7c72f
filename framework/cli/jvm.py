"""`logwheel jars kafka|spark [--into DIR]`: where a JVM part's jars are, fetched if need be
(for an image build or a machine that is offline later); `make jars` fills the checkout's."""

from __future__ import annotations

import argparse
from pathlib import Path

from framework.backfill.session import spark_version
from framework.jvm.jars import KAFKA, SPARK, fetch, kafka_jars, spark_jars


def register_jars(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "jars",
        help="where the broker's or Spark's Kafka connector's jars are, fetching them if need be",
        description=__doc__,
    )
    parser.add_argument("part", choices=["kafka", "spark"])
    parser.add_argument("--into", type=Path, help="fetch into this directory instead")
    parser.set_defaults(func=jars_command)


def jars_command(args: argparse.Namespace) -> int:
    if args.part == "kafka":
        print(fetch(KAFKA, args.into, {}) if args.into else kafka_jars())
        return 0
    version = spark_version()  # the connector must match the installed pyspark
    if args.into:
        print(fetch(SPARK, args.into, {"spark.version": version}))
    else:
        print(spark_jars(version)[0].parent)
    return 0
