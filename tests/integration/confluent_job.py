"""Jobs that read and write the Confluent wire format (tests only): `words` is another
team's topic (declared `format="confluent"`), `doubled` is written in the wire format because
the pipeline has a registry (`Pipeline(name, registry=URL)`). Both carry wordcount.WordCount.
`build_as_written` reads another team's topic with no schema of its own.
"""

from __future__ import annotations

from framework import Computation, Pipeline, key_by


class Double(Computation):
    """Doubles each count, keyed as it came."""

    def __init__(self, out: str) -> None:
        self.out = out

    def process_record(self, ctx, record):
        value = record.value
        ctx.produce(self.out, {"word": value["word"], "count": value["count"] * 2})


def build(name: str, prefix: str, registry: str | None) -> Pipeline:
    pipeline = Pipeline(name, partitions=1, registry=registry)
    pipeline.source(f"{prefix}words", schema="wordcount.WordCount", format="confluent")
    pipeline.computation(
        "double",
        lambda: Double(f"{prefix}doubled"),
        inputs={f"{prefix}words": None},
        outputs={f"{prefix}doubled": "wordcount.WordCount"},
    )
    return pipeline


def build_rekeyed(name: str, prefix: str, registry: str | None) -> Pipeline:
    """`build` with the input re-keyed by its word: the repartition task decodes each value
    (for the key) before the keyed task does."""
    pipeline = Pipeline(name, partitions=1, registry=registry)
    pipeline.source(f"{prefix}words", schema="wordcount.WordCount", format="confluent")
    pipeline.computation(
        "double",
        lambda: Double(f"{prefix}doubled"),
        inputs={f"{prefix}words": key_by("word")},
        outputs={f"{prefix}doubled": "wordcount.WordCount"},
    )
    return pipeline


class Seen(Computation):
    """Writes what it was handed, with the stream it came from, as JSON."""

    def __init__(self, out: str) -> None:
        self.out = out

    def process_record(self, ctx, record):
        ctx.produce(self.out, {"stream": record.stream, "value": record.value})


def build_as_written(name: str, prefix: str, registry: str | None) -> Pipeline:
    """Finding 8 of issue 38, as a new user declares it: `orders` written by another team with
    confluent-kafka's AvroSerializer, declared without a schema (read as written); `notes`,
    JSON, says so; the output is JSON and says so too."""
    pipeline = Pipeline(name, partitions=1, registry=registry)
    pipeline.source(f"{prefix}orders")
    pipeline.source(f"{prefix}notes", format="json")
    pipeline.computation(
        "seen",
        lambda: Seen(f"{prefix}seen"),
        inputs={f"{prefix}orders": None, f"{prefix}notes": None},
        outputs={f"{prefix}seen": None},
        formats={f"{prefix}seen": "json"},
    )
    return pipeline


def build_both_ways(name: str, prefix: str, registry: str | None) -> Pipeline:
    """`build` with a second input, `anything`, declared with no schema: read as each writer
    wrote it (a hostile writer schema is met as written there, and through resolution to
    wordcount.WordCount on `words`)."""
    pipeline = Pipeline(name, partitions=1, registry=registry)
    pipeline.source(f"{prefix}words", schema="wordcount.WordCount", format="confluent")
    pipeline.source(f"{prefix}anything", format="confluent")
    pipeline.computation(
        "double",
        lambda: Double(f"{prefix}doubled"),
        inputs={f"{prefix}words": None, f"{prefix}anything": None},
        outputs={f"{prefix}doubled": "wordcount.WordCount"},
    )
    return pipeline
