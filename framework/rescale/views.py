"""A computation's keyed data as one Spark DataFrame, and the per-key checksums that compare two
such views (framework/rescale/command.py reads the old topics, the staging topics and the new
ones through it).

A view holds, for every key, what a task restores and reads: the latest committed state
(changelog), the latest entry of each pending timer (timer journal), every record id `Dedup`
holds (one row per id of each live `.ids` segment) and the records of each `.by-key` topic
from the group's committed offset to the end, all read read_committed by Spark's own Kafka
source. A row is `kind, key, place, stream, partition, seq, kafka_key, value, headers, ts,
segment, start`: `key` is the user's key (a timer journal key is `[key, tag]`, an id segment
holds ids of many keys); `place` the bytes Kafka's partitioner hashes for it; `seq` orders a
key's pending records (their old partition and offset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from framework.backfill.frames import exploded_ids, read
from framework.backfill.plan import Range

STATE, TIMER, ID, PENDING = "state", "timer", "id", "pending"
KINDS = (STATE, TIMER, ID, PENDING)
OFFSET_BITS = 40
"""A pending record's `seq` is its partition shifted by this many bits, plus its offset."""


@dataclass(frozen=True)
class Topics:
    """Where one copy of the computation's keyed data lives: journal topics by kind, and each
    re-keyed input's `.by-key` topic by stream."""

    changelog: str
    timers: str
    ids: str | None
    by_key: dict[str, str]

    def all(self) -> list[str]:
        return [self.changelog, self.timers, *([self.ids] if self.ids else []),
                *self.by_key.values()]  # fmt: skip


def view(
    spark: Any,
    topics: Topics,
    offsets: dict[str, dict[int, tuple[int, int]]],
    bootstrap: str,
    kafka: dict | None,
) -> Any | None:
    """The view of `topics` over `offsets` (topic -> partition -> [start, end)); None if empty."""
    from pyspark.sql import functions as F

    def frame(topic: str) -> Any:
        ranges = [Range(topic, p, s, e, "", True) for p, (s, e) in offsets.get(topic, {}).items()]
        return read(spark, ranges, bootstrap, kafka)

    def latest(topic: str) -> Any:
        raw = frame(topic)
        if raw is None:
            return None
        newest = F.max_by(F.struct("value", "partition", "offset", "timestamp"), "offset")
        return (
            raw.groupBy("key")
            .agg(newest.alias("l"))
            .where(F.col("l.value").isNotNull())
            .select("key", "l.*")
        )

    parts = []
    state = latest(topics.changelog)
    if state is not None:
        key = F.col("key").cast("string")
        parts.append(_rows(state, STATE, key, F.col("key")))
    timers = latest(topics.timers)
    if timers is not None:
        key = F.from_json(F.col("key").cast("string"), "array<string>").getItem(0)
        parts.append(_rows(timers, TIMER, key, F.encode(key, "UTF-8")))
    ids = latest(topics.ids) if topics.ids else None
    if ids is not None:
        exploded = (
            exploded_ids(ids)
            .withColumn("segment", F.col("key"))
            .withColumn("value", F.col("e.id").cast("binary"))
        )
        key = F.col("e.key")
        parts.append(
            _rows(
                exploded,
                ID,
                key,
                F.encode(key, "UTF-8"),
                segment=F.col("segment"),
                start=F.col("s.start"),
            )  # fmt: skip
        )
    for stream, topic in topics.by_key.items():
        raw = frame(topic)
        if raw is None:
            continue
        seq = F.shiftleft(F.col("partition").cast("long"), OFFSET_BITS) + F.col("offset")
        parts.append(
            raw.select(
                F.lit(PENDING).alias("kind"),
                F.coalesce(F.col("key").cast("string"), F.lit("")).alias("key"),
                F.coalesce(F.col("key"), F.lit(b"")).alias("place"),
                F.lit(stream).alias("stream"),
                "partition",
                seq.alias("seq"),
                F.col("key").alias("kafka_key"),
                "value",
                "headers",
                F.unix_millis("timestamp").alias("ts"),
                F.lit(None).cast("binary").alias("segment"),
                F.lit(None).cast("long").alias("start"),
            )
        )
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _rows(frame: Any, kind: str, key: Any, place: Any, segment: Any = None, start: Any = None):
    from pyspark.sql import functions as F

    headers = "array<struct<key:string,value:binary>>"
    return frame.select(
        F.lit(kind).alias("kind"),
        key.alias("key"),
        place.alias("place"),
        F.lit(None).cast("string").alias("stream"),
        "partition",
        F.col("offset").alias("seq"),
        F.col("key").alias("kafka_key"),
        "value",
        F.lit(None).cast(headers).alias("headers"),
        F.unix_millis("timestamp").alias("ts"),
        (F.lit(None).cast("binary") if segment is None else segment).alias("segment"),
        (F.lit(None).cast("long") if start is None else start).alias("start"),
    )


@dataclass(frozen=True)
class Verification:
    """Old against new, key by key."""

    keys: int
    counts: dict[str, int]  # rows of each kind, old side
    new_counts: dict[str, int]
    mismatched: int  # keys whose checksums differ (or that one side lacks)
    misplaced: int  # new rows not in the partition Kafka's partitioner gives their key
    examples: list[str]

    @property
    def ok(self) -> bool:
        return self.mismatched == 0 and self.misplaced == 0 and self.counts == self.new_counts

    def lines(self, what: str) -> list[str]:
        def shown(counts: dict[str, int]) -> str:
            return ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS)

        out = [
            f"verify {what}: {self.keys} keys; old: {shown(self.counts)}; "
            f"new: {shown(self.new_counts)}",
            f"verify {what}: {self.mismatched} keys whose checksums differ, {self.misplaced} "
            f"rows outside their key's partition: {'OK' if self.ok else 'FAILED'}",
        ]
        out += [f"verify {what}: differs: {e}" for e in self.examples]
        return out


def verify(old: Any | None, new: Any | None, partitions: int, spark: Any) -> Verification:
    """Per-key checksums of `old` and `new` (sha-256 of the sorted hashes of a key's items:
    its state, each timer entry, each id with its slice, each pending record with its rank
    among the key's records of its stream), compared key by key; and the rows of `new`
    outside the partition `bytes_partition(place, partitions)`."""
    from pyspark.sql import functions as F

    empty = spark.createDataFrame([], "key string, sum string")
    old_sums, old_counts, _ = _sums(old, None) if old is not None else (empty, {}, 0)
    new_sums, new_counts, misplaced = _sums(new, partitions) if new is not None else (empty, {}, 0)
    joined = old_sums.alias("o").join(new_sums.alias("n"), "key", "full_outer")
    differs = ~F.col("o.sum").eqNullSafe(F.col("n.sum"))
    keys, mismatched = joined.agg(F.count("*"), F.count(F.when(differs, 1))).first()
    examples = []
    if mismatched:
        examples = [r["key"] for r in joined.where(differs).select("key").limit(5).collect()]
    return Verification(keys, old_counts, new_counts, mismatched, misplaced, examples)


def _sums(frame: Any, partitions: int | None) -> tuple[Any, dict[str, int], int]:
    """Per key its checksum; rows per kind; rows outside their key's partition among
    `partitions` (None: not checked)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from framework.kafka.partitioning import bytes_partition

    @F.udf("int")
    def placed(place):
        return bytes_partition(bytes(place), partitions)

    rank = F.row_number().over(Window.partitionBy("key", "stream").orderBy("seq"))
    headers = F.coalesce(F.to_json("headers"), F.lit(""))
    pending = F.concat_ws("|", F.lit("p"), "stream", F.col("rank").cast("string"),
                          F.hex("value"), F.col("ts").cast("string"), headers)  # fmt: skip
    item = (
        F.when(F.col("kind") == STATE, F.concat_ws("|", F.lit("s"), F.hex("value")))
        .when(
            F.col("kind") == TIMER, F.concat_ws("|", F.lit("t"), F.hex("kafka_key"), F.hex("value"))
        )  # fmt: skip
        .when(
            F.col("kind") == ID,
            F.concat_ws("|", F.lit("i"), F.hex("value"), F.col("start").cast("string")),
        )  # fmt: skip
        .otherwise(pending)
    )
    cached = (
        frame.withColumn("rank", rank)
        .withColumn("h", F.sha2(item, 256))
        .withColumn(
            "misplaced",
            F.lit(False) if partitions is None else placed("place") != F.col("partition"),
        )  # fmt: skip
        .select("key", "kind", "h", "misplaced")
        .cache()
    )
    misplaced = F.count(F.when(F.col("misplaced"), 1)).alias("m")
    rows = cached.groupBy("kind").agg(F.count("*").alias("n"), misplaced).collect()
    sums = cached.groupBy("key").agg(
        F.sha2(F.concat_ws(",", F.array_sort(F.collect_list("h"))), 256).alias("sum")
    )
    return sums, {r["kind"]: r["n"] for r in rows}, sum(r["m"] for r in rows)


def ranges_of(ends: Iterable[tuple[str, int, int, int]]) -> dict[str, dict[int, tuple[int, int]]]:
    """(topic, partition, start, end) rows as `view`'s offsets."""
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for topic, partition, start, end in ends:
        out.setdefault(topic, {})[partition] = (start, end)
    return out
