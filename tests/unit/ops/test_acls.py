"""The ACLs `logwheel acls` grants: each computation exactly its own topics, group and
transactional ids, READ on what it reads, WRITE on what it writes; an injector WRITE on its
streams and watermark channel alone; DELETE only with allow_reset; never host `*` by default."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace

import pytest

from framework.cli.acls import local_address
from framework.core.part import reader_group
from framework.core.pipeline import InjectorWatermark, PipelineError, Source
from framework.kafka.topics import pipeline_topics
from framework.ops.acls import part_acls, pipeline_acls
from jobs.wordcount import build
from jobs.zeitgeist import pipeline as zeitgeist
from tests.unit.sinks.fakes import IdleSink

HOST = "10.1.2.3"


def _allowed(acls, resource: str, name: str, operation: str) -> bool:
    return any(
        a.resource == resource
        and a.operation == operation
        and (a.name == name if a.pattern == "LITERAL" else name.startswith(a.name))
        for a in acls
    )


@pytest.mark.parametrize("pipeline", [build("wc", "wc-"), zeitgeist], ids=lambda p: p.name)
def test_a_computation_gets_its_own_topics_and_none_of_another(pipeline):
    for name, spec in pipeline.computations.items():
        acls = part_acls(pipeline, name, "User:c", host=HOST)
        for topic in pipeline_topics(pipeline):
            own = topic.kind != "stream" and name in topic.owners
            for op in ("READ", "WRITE", "CREATE", "DESCRIBE"):
                if own:
                    assert _allowed(acls, "TOPIC", topic.name, op), (name, topic.name, op)
            if topic.kind in ("changelog", "timers", "by-key", "dlq") and not own:
                for op in ("READ", "WRITE", "CREATE", "DELETE"):
                    assert not _allowed(acls, "TOPIC", topic.name, op), (name, topic.name, op)
        for group in (spec.group, reader_group(spec.group)):
            assert _allowed(acls, "GROUP", group, "READ")
        assert _allowed(acls, "TRANSACTIONAL_ID", f"{spec.group}.pod-0", "WRITE")
        others = [c for c in pipeline.computations.values() if c.name != name]
        for other in others:
            assert not _allowed(acls, "GROUP", other.group, "READ")
            assert not _allowed(acls, "TRANSACTIONAL_ID", f"{other.group}.pod-0", "WRITE")
        assert all(a.host == HOST and a.principal == "User:c" for a in acls)
        assert not any(a.operation == "DELETE" for a in acls)


def test_a_computation_reads_its_inputs_and_upstream_marks_and_writes_its_outputs():
    wc = build("wc", "wc-")
    split = part_acls(wc, "split-words", "User:s", host=HOST)
    count = part_acls(wc, "count-words", "User:c", host=HOST)
    assert _allowed(split, "TOPIC", "wc-lines", "READ")
    assert not _allowed(split, "TOPIC", "wc-lines", "WRITE")
    assert _allowed(split, "TOPIC", "wc-words", "WRITE")
    assert not _allowed(split, "TOPIC", "wc-words", "READ")
    assert _allowed(count, "TOPIC", "wc-words", "READ")
    assert _allowed(count, "TOPIC", "wc.split-words.watermarks", "READ")
    assert not _allowed(count, "TOPIC", "wc.split-words.watermarks", "WRITE")
    assert _allowed(count, "TOPIC", "wc-word-counts", "WRITE")
    literal = [a for a in split + count if a.pattern == "LITERAL" and a.resource == "TOPIC"]
    assert not any(a.operation in ("CREATE", "DELETE", "ALTER") for a in literal)


def test_a_computation_named_like_the_start_of_another_does_not_get_its_group():
    from framework import Computation, Pipeline

    class Noop(Computation):
        def process_record(self, ctx, record):
            pass

    p = Pipeline("p").source("in")
    p.computation("count", Noop, inputs={"in": None})
    p.computation("count-words", Noop, inputs={"in": None})
    acls = part_acls(p, "count", "User:c", host=HOST)
    assert _allowed(acls, "GROUP", "p.count", "READ")
    assert not _allowed(acls, "GROUP", "p.count-words", "READ")
    assert not _allowed(acls, "TOPIC", "p.count-words.changelog", "READ")


def test_an_injector_writes_only_its_streams_and_its_watermark_channel():
    acls = part_acls(zeitgeist, "query-generator", "User:i", host=HOST)
    topics = {(a.name, a.operation) for a in acls if a.resource == "TOPIC"}
    assert ("queries", "WRITE") in topics
    assert ("zeitgeist.query-generator.watermarks", "WRITE") in topics
    assert not any(op in ("READ", "DELETE") for _, op in topics)
    assert {name for name, _ in topics} == {"queries", "zeitgeist.query-generator.watermarks"}
    for spec in pipeline_topics(zeitgeist):
        if spec.kind in ("changelog", "timers"):
            assert not _allowed(acls, "TOPIC", spec.name, "WRITE")
    assert _allowed(acls, "TRANSACTIONAL_ID", "zeitgeist.query-generator.injector-0", "WRITE")


def test_write_is_never_granted_on_a_topic_named_like_an_internal_one():
    """Defence in depth: `Pipeline` refuses such an output at declaration; a declaration
    changed after it was checked is refused again here, never granted."""
    wc = build("wc", "wc-")
    spec = wc["count-words"]
    wc = wc.redeclared(replace(spec, outputs={"billing.count.changelog": None}))
    with pytest.raises(PipelineError, match=r"refusing to grant Write on 'billing\.count\."):
        part_acls(wc, "count-words", "User:c", host=HOST)
    with pytest.raises(PipelineError, match="named like the changelog of 'count'"):
        pipeline_acls(wc, "User:job")
    zg = deepcopy(zeitgeist)
    zg.sources["wc.split-words.timers"] = Source(
        "wc.split-words.timers", None, InjectorWatermark("query-generator")
    )
    with pytest.raises(PipelineError, match=r"Write on 'wc\.split-words\.timers'.*the timers"):
        part_acls(zg, "query-generator", "User:i", host=HOST)


def test_delete_only_with_allow_reset_and_only_on_the_own_prefix():
    wc = build("wc", "wc-")
    plain = set(part_acls(wc, "count-words", "User:c", host=HOST))
    with_reset = set(part_acls(wc, "count-words", "User:c", host=HOST, allow_reset=True))
    assert [(a.resource, a.pattern, a.name, a.operation) for a in with_reset - plain] == [
        ("TOPIC", "PREFIXED", "wc.count-words.", "DELETE")
    ]


def test_one_principal_for_the_whole_job_is_the_union_plus_status():
    wc = build("wc", "wc-")
    union = set(pipeline_acls(wc, "User:job", host=HOST))
    for name in wc.computations:
        assert set(part_acls(wc, name, "User:job", host=HOST)) <= union
    assert _allowed(union, "GROUP", reader_group("wc"), "READ")  # logwheel status
    assert not any(a.pattern == "PREFIXED" and a.name == "wc." for a in union)
    assert all(a.host == "127.0.0.1" for a in pipeline_acls(wc, "User:job"))


def test_the_default_host_is_this_machines_address_towards_the_broker():
    assert local_address(None) == "127.0.0.1"
    assert local_address("127.0.0.1:9092") == "127.0.0.1"
    assert local_address("localhost:9092,other:9092") == "127.0.0.1"
    assert local_address("no-such-host.invalid:9092") == "127.0.0.1"


def test_a_sink_reads_its_inputs_in_its_group_and_writes_only_its_dead_letters():
    wc = build("wc", "wc-").sink("db", inputs={"wc-word-counts": None}, sink=IdleSink())
    acls = part_acls(wc, "db", "User:db", host=HOST)
    assert _allowed(acls, "TOPIC", "wc-word-counts", "READ")
    assert _allowed(acls, "GROUP", "wc.db", "READ")
    for op in ("WRITE", "CREATE", "DESCRIBE_CONFIGS"):
        assert _allowed(acls, "TOPIC", "wc.db.dlq", op)
    written = {a.name for a in acls if a.operation in ("WRITE", "CREATE")}
    assert written == {"wc.db.dlq"}
    assert not any(a.resource == "TRANSACTIONAL_ID" or a.pattern == "PREFIXED" for a in acls)
    assert not _allowed(acls, "TOPIC", "wc.count-words.changelog", "READ")
    assert not _allowed(acls, "GROUP", "wc.count-words", "READ")
    assert set(acls) <= set(pipeline_acls(wc, "User:db", host=HOST))


def test_the_queries_describe_each_computations_group_and_read_where_it_answers():
    wc = build("wc", "wc-")
    acls = part_acls(wc, "queries", "User:q", host=HOST)
    for name in wc.computations:
        group = f"wc.{name}"
        assert _allowed(acls, "GROUP", group, "DESCRIBE")
        assert not _allowed(acls, "GROUP", group, "READ")  # it joins no computation's group
        assert _allowed(acls, "TOPIC", f"{group}.serving", "READ")
        assert _allowed(acls, "GROUP", reader_group(group), "READ")
        assert not _allowed(acls, "TOPIC", f"{group}.changelog", "READ")
    assert not any(a.operation in ("WRITE", "CREATE", "DELETE") for a in acls)


def test_no_part_may_take_the_queries_name():
    with pytest.raises(PipelineError, match="'queries' names the queries"):
        build("wc", "wc-").sink("queries", inputs={"wc-word-counts": None}, sink=IdleSink())
