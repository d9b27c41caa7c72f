"""`/api/pipeline` assembled from what one look at the cluster found (no broker): the rows of
`logwheel status` as they are, with rates, the held-back flag, standbys, state and dead
letters with their replay command beside them."""

from __future__ import annotations

import dataclasses

from framework import BoundedOutOfOrderness, Computation, Pipeline, key_by
from framework.ops.dashboard import HELD_BACK_MS, Facts, assemble, replay_command, status_rows
from framework.ops.status import Status
from tests.unit.sinks.fakes import IdleSink

NOW = 1_800_000_000_000


def pipeline() -> Pipeline:
    p = Pipeline("shop", partitions=2)
    p.source("clicks", watermark=BoundedOutOfOrderness(ms=0))
    p.computation("count", Computation, inputs={"clicks": key_by("user")})
    return p


def rows(offset: int = 10, behind: int = HELD_BACK_MS) -> list[Status]:
    low = NOW - 60_000
    held = "count/by-key/clicks/1"
    return [
        Status("count", "clicks", 0, low, 60_000, 0, NOW - 5, "shop.count.a", offset=offset),
        Status(
            "count",
            "clicks",
            1,
            low - behind,
            60_000 + behind,
            0,
            NOW - 5,
            "shop.count.a",
            offset=offset * 2,
        ),  # fmt: skip
        Status(
            "count",
            "shop.count.clicks.by-key",
            0,
            low - behind,
            1,
            0,
            NOW - 5,
            "shop.count.a",
            held_back_by=held,
            offset=3,
        ),  # fmt: skip
        Status(
            "count",
            "shop.count.clicks.by-key",
            1,
            low - behind,
            1,
            2,
            NOW - 9,
            "shop.count.a",
            held_back_by=held,
            offset=None,
        ),  # fmt: skip
    ]


def facts(now: int = NOW, **kwargs) -> Facts:
    return Facts(
        now,
        kwargs.pop("status", rows()),
        standbys={"count": {1: ["shop.count.b"]}},
        dead_letters={"count": {"decode": 2, "process_record": 1}},
        state_offsets={"count": {0: 40, 1: 7}},
    )


def test_the_status_rows_come_back_out_exactly():
    api = assemble(pipeline(), "shop.job:pipeline", facts())
    assert status_rows(api) == [dataclasses.asdict(r) for r in rows()]


def test_a_partition_this_far_behind_its_siblings_is_flagged_and_placed_on_the_graph():
    api = assemble(pipeline(), "m:p", facts())
    (count,) = api["computations"]
    flagged = [(p["topic"], p["partition"]) for p in count["partitions"] if p["holding_back"]]
    assert flagged == [("clicks", 1)] and count["holding_back"]
    keyed = count["partitions"][2]
    assert keyed["held_back_by_place"] == {"node": "s:clicks", "partition": 1,
                                           "label": "clicks[1]"}  # fmt: skip
    closer = assemble(pipeline(), "m:p", facts(status=rows(behind=HELD_BACK_MS - 1)))
    assert not closer["computations"][0]["holding_back"]


def test_an_unknown_watermark_among_known_ones_is_flagged():
    unknown = rows()
    unknown[1] = dataclasses.replace(unknown[1], low_watermark=None, lag_ms=None)
    (count,) = assemble(pipeline(), "m:p", facts(status=unknown))["computations"]
    assert [p["holding_back"] for p in count["partitions"]] == [False, True, False, False]


def test_records_per_second_are_committed_offsets_since_the_last_look():
    before = facts(now=NOW - 2_000, status=rows(offset=10))
    api = assemble(pipeline(), "m:p", facts(status=rows(offset=30)), previous=before)
    (count,) = api["computations"]
    rates = [p["records_per_second"] for p in count["partitions"]]
    assert rates == [10.0, 20.0, 0.0, None]  # no commit yet: no rate
    assert count["records_per_second"] == 30.0
    first = assemble(pipeline(), "m:p", facts())["computations"][0]
    assert first["records_per_second"] is None


def test_the_computation_s_summary_tasks_and_dead_letters():
    api = assemble(pipeline(), "shop.job:pipeline", facts(), replay_options="--bootstrap h:1")
    assert api["now"] == NOW and api["pipeline"] == "shop"
    (count,) = api["computations"]
    assert count["low_watermark"] == NOW - 60_000 - HELD_BACK_MS  # the keyed tasks' minimum
    assert count["lag_ms"] == 60_000 + HELD_BACK_MS
    assert count["consumer_lag"] == 2 and count["last_commit"] == NOW - 5
    assert count["tasks"] == [
        {"partition": 0, "owner": "shop.count.a", "standbys": [], "state_offsets": 40},
        {"partition": 1, "owner": "shop.count.a", "standbys": ["shop.count.b"],
         "state_offsets": 7},
    ]  # fmt: skip
    letters = count["dead_letters"]
    assert letters["topic"] == "shop.count.dlq" and letters["total"] == 3
    assert letters["by_stage"][1] == {
        "stage": "process_record",
        "count": 1,
        "replay": "logwheel dlq replay shop.job:pipeline --computation count "
        "--stage process_record --bootstrap h:1",
    }
    nodes = {n["id"]: n for n in api["graph"]["nodes"]}
    assert nodes["c:count"]["kind"] == "computation" and nodes["c:count"]["w"] > 0


def test_a_replay_command_quotes_what_a_shell_would_split():
    line = replay_command("my job:pipeline", "count", "process_record")
    assert (
        line == "logwheel dlq replay 'my job:pipeline' --computation count --stage process_record"
    )


def test_a_sink_has_its_card_with_its_rows_and_dead_letters_and_no_tasks():
    p = pipeline().sink("db", inputs={"clicks": None}, sink=IdleSink())
    sink_row = Status("db", "clicks", 0, None, None, 4, NOW - 1, "shop.db.x", offset=9)
    found = facts(status=[*rows(), sink_row])
    found.dead_letters["db"] = {"write": 2}
    api = assemble(p, "m:p", found)
    count, db = api["computations"]
    assert (db["name"], db["kind"], db["node"], db["group"]) == ("db", "sink", "k:db", "shop.db")
    assert db["tasks"] == [] and db["consumer_lag"] == 4
    assert db["dead_letters"]["topic"] == "shop.db.dlq"
    assert db["dead_letters"]["by_stage"][0]["replay"] is None  # listed, not replayed
    assert status_rows(api) == [dataclasses.asdict(r) for r in [*rows(), sink_row]]
    assert {"k:db"} <= {n["id"] for n in api["graph"]["nodes"]}
