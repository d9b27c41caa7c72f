"""What decoding the Confluent wire format costs a backfill's Spark task, and why the backfill
decodes in its Python tasks rather than with Spark's `from_avro` (issue 22, item 4). Two
measurements, one run each:

1. CPU µs per record of the executor's Python decode path (`kafka.record_decoding.decode_record`,
   what `backfill.task` calls for every input row) over the same values in the wire format
   and in Avro single-object encoding (one in-process `mock://` registry, cached after the
   first id as a real registry's client is).
2. Wall µs per row for a Spark task (local[1], `DataFrame.rdd.mapPartitions`, as
   `backfill.driver` runs its tasks) to turn each row into the dict a hook gets: from the
   wire-format bytes decoded in Python, and from the struct Spark's `from_avro` would hand
   over (its JVM decoding not even counted).

    .venv/bin/python bench/backfill_decode.py [RECORDS]

One run, 2026-11-25, 200,000 records, 2 shared cores (docs/performance.md): the wire format
decodes at 2.11 µs CPU a record against 2.21 for single-object encoding (ratio 0.95); a Spark
task turns a row into the hook's dict in 17.1 µs from the bytes decoded in Python against
15.3 µs from `from_avro`'s struct (1.12x, before `from_avro`'s own JVM decoding), under 5% of
the backfill's ~37 µs CPU per extra record. So the backfill decodes in Python, with the
decoder `run` uses: the same dead letters and reasons, every writer schema id resolved.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.wire_codecs import MockSource  # noqa: E402
from framework.kafka.record_decoding import decode_record  # noqa: E402
from framework.serde.catalogue import default_schemas  # noqa: E402
from framework.serde.confluent import WireFormat  # noqa: E402

NAME = "wordcount.WordCount"


def _cpu_us(decode: Callable[[bytes], Any], data: Sequence[bytes]) -> float:
    began = time.process_time()
    for i, value in enumerate(data):
        decode_record(decode, "words", b"k", value, 0, [], "words/0/", i)
    return (time.process_time() - began) / len(data) * 1e6


def python_decode(n: int) -> tuple[float, float]:
    """(wire format, single-object) CPU µs per record through the task's decode path."""
    schemas = default_schemas()
    wire = WireFormat(MockSource(), schemas)
    values = [{"word": f"word{i % 5000}", "count": i} for i in range(n)]
    encode = wire.encoder("words", NAME)
    wired = [encode(v) for v in values]
    single = [schemas.encoder_for(NAME)(v) for v in values]
    return (
        _cpu_us(wire.decoder("words", NAME), wired),
        _cpu_us(schemas.decoder_for(NAME), single),
    )


class _Fixed:
    """A `SchemaSource` of the schemas registered in the driver's mock registry, so Spark's
    Python workers (other processes) decode by id without a registry."""

    url = "mock://bench"

    def __init__(self, schemas: dict[int, str]) -> None:
        self.schemas = schemas

    def schema(self, schema_id: int) -> str:
        return self.schemas[schema_id]

    def register(self, subject: str, schema: str) -> int:
        raise NotImplementedError


def spark_rows(n: int) -> tuple[float, float]:
    """Wall µs per row for a Spark task's Python to get each record's value as the dict a hook
    sees: (the wire-format bytes decoded in Python, the struct `from_avro` would give made a
    dict), both frames cached in Spark first so that only the task's work is timed."""
    from framework.backfill.session import session

    source, schemas = MockSource(), default_schemas()
    encode = WireFormat(source, schemas).encoder("words", NAME)
    values = [{"word": f"word{i % 5000}", "count": i} for i in range(n)]
    wired = [encode(v) for v in values]
    known = {i: source.schema(i) for i in {int.from_bytes(w[1:5], "big") for w in wired[:1]}}

    def in_python(rows: Any) -> list[int]:
        decode = WireFormat(_Fixed(known), default_schemas()).decoder("words", NAME)
        return [sum(1 for r in rows if decode_record(decode, "words", None, r[0], 0, (), "", 0))]

    def from_struct(rows: Any) -> list[int]:
        return [sum(1 for r in rows if r[0].asDict(recursive=True))]

    spark = session("local[1]", "logwheel-bench-backfill-decode")
    try:
        runs = {
            "bytes": (spark.createDataFrame([(w,) for w in wired], "value binary"), in_python),
            "struct": (
                spark.createDataFrame(
                    [((v["word"], v["count"]),) for v in values],
                    "value struct<word:string,count:bigint>",
                ),
                from_struct,
            ),
        }
        for frame, _ in runs.values():
            frame.cache().count()
        best: dict[str, float] = {}
        for _ in range(3):
            for label, (frame, work) in runs.items():
                began = time.monotonic()
                assert frame.rdd.mapPartitions(work).collect() == [n]
                us = (time.monotonic() - began) / n * 1e6
                best[label] = min(best.get(label, us), us)
        return best["bytes"], best["struct"]
    finally:
        spark.stop()


def main(argv: Sequence[str]) -> int:
    n = int(argv[0]) if argv else 200_000
    wire, single = python_decode(n)
    print(f"decode_record, CPU µs/record over {n}: wire format {wire:.2f}, "
          f"single-object {single:.2f}, ratio {wire / single:.2f}")  # fmt: skip
    as_bytes, as_struct = spark_rows(n)
    print(f"Spark task (local[1]) to a hook's dict, wall µs/row over {n}, best of 3: "
          f"wire bytes decoded in Python {as_bytes:.2f}, from_avro's struct {as_struct:.2f}, "
          f"ratio {as_bytes / as_struct:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
