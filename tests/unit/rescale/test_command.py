"""What a run of `logwheel rescale` does next after an interruption, and what it refuses
(framework/rescale/command.py)."""

from __future__ import annotations

import pytest

from framework import Computation, Dedup, Pipeline, key_by
from framework.core.pipeline import PipelineError
from framework.rescale.command import _refuse_unmovable, next_step, topics_of


class Nothing(Computation):
    def process_record(self, ctx, record):
        pass


def test_an_interrupted_switch_is_finished_and_a_finished_rescale_does_nothing():
    switching = {"status": "switching", "partitions": 8, "from": 4}
    assert next_step(switching, 0, 8) == "switch"  # old topics gone: finish from staging
    assert next_step(switching, 8, 8) == "switch"
    assert next_step(None, 4, 8) == "stage"
    assert next_step({"status": "done", "partitions": 8}, 8, 8) == "nothing"
    assert next_step({"status": "done", "partitions": 8}, 8, 3) == "stage"
    with pytest.raises(PipelineError, match="--partitions 8"):
        next_step(switching, 0, 3)


def test_an_input_read_by_its_kafka_key_keeps_its_count_and_the_command_says_what_to_do():
    pipeline = Pipeline("rs", partitions=4)
    pipeline.source("clicks")
    pipeline.computation("c", Nothing, inputs={"clicks": None})
    with pytest.raises(PipelineError, match=r"by its Kafka key.*\(4\).*key_by\(\.\.\.\)"):
        _refuse_unmovable(pipeline["c"], {"clicks": 4}, 8)


def test_a_table_must_already_have_the_new_count():
    pipeline = Pipeline("rs", partitions=4)
    pipeline.source("clicks")
    pipeline.computation("c", Nothing, inputs={"clicks": key_by("u")}, tables={"t": "users"})
    with pytest.raises(PipelineError, match="give the table 8 partitions"):
        _refuse_unmovable(pipeline["c"], {"users": 4}, 8)
    _refuse_unmovable(pipeline["c"], {"users": 8}, 8)


def test_staging_topics_sit_beside_the_computations_own():
    pipeline = Pipeline("rs", partitions=4)
    pipeline.source("clicks")
    pipeline.computation("c", Nothing, inputs={"clicks": key_by("u")})
    staging = topics_of(pipeline["c"], staging=True)
    assert staging.all() == ["rs.c.rescale.changelog", "rs.c.rescale.timers",
                             "rs.c.rescale.clicks.by-key"]  # fmt: skip
    assert topics_of(pipeline["c"]).all() == ["rs.c.changelog", "rs.c.timers", "rs.c.clicks.by-key"]


def test_other_topics_of_the_key_space_are_recreated_empty_not_moved():
    """The topic dead letters are replayed through, read by keyed task p beside its inputs:
    `emptied` names it (the rescale refuses while it holds unread records), and nothing the
    rescale moves."""
    from framework.rescale import command

    pipeline = Pipeline("rs", partitions=4)
    pipeline.source("clicks")
    pipeline.computation("c", Nothing, inputs={"clicks": key_by("u")}, dedup=Dedup())
    assert command.emptied(pipeline, pipeline["c"]) == ["rs.c.replay"]
