"""The vocabulary a pipeline is declared with and its checks (core/declarations.py): names
Kafka accepts, watermark policies, key extractors and the routing rule every runtime shares;
each refusal a `PipelineError` naming the fix."""

from __future__ import annotations

import re

import pytest

from framework.core.api import Record
from framework.core.declarations import (
    TOPIC_MAX,
    BoundedOutOfOrderness,
    InjectorWatermark,
    Input,
    Percentile,
    PipelineError,
    check_format,
    check_name,
    check_outside,
    check_schema,
    check_stream,
    check_subject_strategy,
    check_writable,
    internal_topic,
    key_by,
)


def record(value: object, key: str = "kafka-key") -> Record:
    return Record(key, value, 0, "s", "id-1")


@pytest.mark.parametrize("name", ["zeitgeist", "a", "word-count2"])
def test_names_of_lower_case_letters_digits_and_dashes_are_taken(name):
    check_name("pipeline", name)


@pytest.mark.parametrize("name", ["Zeitgeist", "2a", "a_b", "a.b", "", "zz\n", None])
def test_other_names_are_refused_with_an_example(name):
    with pytest.raises(PipelineError, match=r"must match \[a-z\]\[a-z0-9-\]\*, e.g. 'zeitgeist'"):
        check_name("pipeline", name)


def test_a_stream_is_any_kafka_topic_name_up_to_kafkas_length_limit():
    check_stream("Orders.v2_eu-west")
    check_stream("x" * TOPIC_MAX)
    for bad in (".hidden", "a b", "a/b", "x\n"):
        with pytest.raises(PipelineError, match="is not a valid Kafka topic name"):
            check_stream(bad)
    with pytest.raises(PipelineError, match=f"{TOPIC_MAX + 1} characters, over Kafka's"):
        check_stream("x" * (TOPIC_MAX + 1))


def test_a_stream_inside_another_owners_internal_prefix_is_refused():
    prefixes = {"computation 'count'": "wc.count."}
    check_outside("wc.counts", prefixes)
    with pytest.raises(PipelineError, match="inside computation 'count''s internal prefix"):
        check_outside("wc.count.changelog", prefixes)


def test_any_pipelines_internal_topic_is_known_by_its_name():
    assert internal_topic("billing.count.changelog") == (
        "the changelog of 'count' in pipeline 'billing'"
    )
    assert internal_topic("billing.count.eu.orders.by-key") == (
        "the repartition topic of 'eu.orders' of 'count' in pipeline 'billing'"
    )
    for kind in ("timers", "watermarks", "dlq", "ids", "replay", "replayed", "backfill"):
        assert internal_topic(f"a.b-2.{kind}") is not None, kind


@pytest.mark.parametrize(
    "stream",
    ["orders", "orders.v2", "shop.orders", "eu.orders.updates", "Billing.count.changelog",
     "billing.count.changelog-v2", "billing.count.by-key", "billing.changelog", "1.b.dlq"],
)  # fmt: skip
def test_streams_with_dots_that_no_pipeline_keeps_for_itself_may_be_written(stream):
    assert internal_topic(stream) is None
    check_writable(stream, "computation 'c': output")


def test_writing_a_stream_named_like_an_internal_topic_is_refused_naming_the_fix():
    rule = (
        "computation 'c': output 'billing.count.changelog' is named like the changelog of "
        "'count' in pipeline 'billing': a pipeline may not write another's internal topics; "
        "rename the stream, e.g. 'billing.count-changelog'"
    )
    with pytest.raises(PipelineError, match=f"^{re.escape(rule)}$"):
        check_writable("billing.count.changelog", "computation 'c': output")
    assert internal_topic("billing.count-changelog") is None  # the fix it names works


def test_formats_subject_strategies_and_schema_names_are_the_listed_ones():
    check_format("source 's'", None)
    check_format("source 's'", "confluent")
    check_format("source 's'", "json")
    with pytest.raises(
        PipelineError, match=r"format='protobuf'; use one of \('avro', 'confluent', 'json'\)"
    ):
        check_format("source 's'", "protobuf")
    with pytest.raises(PipelineError, match="leave the schema out for JSON"):
        check_format("source 's'", "json", "wordcount.WordCount")
    check_subject_strategy("registry", "topic_record")
    with pytest.raises(PipelineError, match="RecordNameStrategy"):
        check_subject_strategy("registry", "TopicNameStrategy")
    check_schema("zeitgeist.SearchQuery")
    with pytest.raises(PipelineError, match="full Avro name"):
        check_schema("SearchQuery")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: BoundedOutOfOrderness(ms=-1), "ms >= 0 and idle_ms > 0"),
        (lambda: BoundedOutOfOrderness(ms=0, idle_ms=0), "ms >= 0 and idle_ms > 0"),
        (lambda: BoundedOutOfOrderness(ms=0, max_future_ms=1.5), "max_future_ms=1.5"),
        (lambda: BoundedOutOfOrderness(ms=0, on_future="drop"), "on_future='drop'"),
        (lambda: InjectorWatermark("Gen"), "a name like 'query-generator'"),
        (lambda: InjectorWatermark("gen", processes=0), "processes >= 1"),
        (lambda: InjectorWatermark("gen", max_future_ms=-1), "max_future_ms=-1"),
        (lambda: Percentile(0), r"0 < fraction <= 1"),
        (lambda: Percentile(1.01), r"0 < fraction <= 1"),
        (lambda: Percentile(True), r"0 < fraction <= 1"),  # a bool is no fraction
    ],
)
def test_a_watermark_policy_that_cannot_work_is_refused_naming_the_fix(make, message):
    with pytest.raises(PipelineError, match=message):
        make()


def test_policies_that_can_work_are_taken():
    assert BoundedOutOfOrderness(ms=0, max_future_ms=0, on_future="dead_letter").ms == 0
    assert InjectorWatermark("query-generator", processes=3).processes == 3
    assert Percentile(1).fraction == 1 and Percentile(0.5).fraction == 0.5


def test_key_by_takes_a_field_as_text_and_says_when_there_is_none():
    assert key_by("user")(record({"user": 42})) == "42"
    assert repr(key_by("user")) == "key_by('user')"
    for value in ({"other": 1}, "not a mapping", None):
        with pytest.raises(KeyError, match="record has no field 'user' to key by"):
            key_by("user")(record(value))


def test_an_input_routes_by_its_extractor_else_by_the_kafka_key():
    assert Input("s", None).route(record({"user": "u"})) == "kafka-key"
    assert Input("s", key_by("user")).route(record({"user": "u"})) == "u"
    assert Input("s", lambda r: "").route(record({})) == ""  # an empty key is still a key


@pytest.mark.parametrize("returned", [None, 7, b"bytes"])
def test_an_extractor_returning_anything_but_a_str_fails_the_record_not_the_key_space(returned):
    with pytest.raises(TypeError, match=f"returned {type(returned).__name__}, not str"):
        Input("s", lambda r: returned).route(record({}))
