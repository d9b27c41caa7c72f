"""The ACLs `logwheel acls` grants: everything a pipeline owns falls under its prefix."""

from __future__ import annotations

import pytest

from framework.kafka.config import reader_group
from framework.kafka.topics import pipeline_topics
from framework.ops.acls import pipeline_acls
from jobs.wordcount import build
from jobs.zeitgeist import pipeline as zeitgeist


def _allowed(acls, resource: str, name: str, operation: str) -> bool:
    return any(
        a.resource == resource
        and a.operation == operation
        and (a.name == name if a.pattern == "LITERAL" else name.startswith(a.name))
        for a in acls
    )


@pytest.mark.parametrize("pipeline", [build("wc", "wc-"), zeitgeist], ids=lambda p: p.name)
def test_every_internal_resource_is_under_the_prefix(pipeline):
    acls = pipeline_acls(pipeline, "User:job")
    prefixed = [a for a in acls if a.pattern == "PREFIXED"]
    assert {a.name for a in prefixed} == {f"{pipeline.name}."}
    for spec in pipeline_topics(pipeline):
        if spec.kind != "stream":
            for op in ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS"):
                assert _allowed(prefixed, "TOPIC", spec.name, op), (spec.name, op)
    for computation in pipeline.computations.values():
        for group in (computation.group, reader_group(computation.group)):
            assert _allowed(prefixed, "GROUP", group, "READ")
            assert _allowed(prefixed, "GROUP", group, "DESCRIBE")
        transactional_id = f"{computation.group}.pod-0"  # Member: <group>.<instance>
        assert _allowed(prefixed, "TRANSACTIONAL_ID", transactional_id, "WRITE")


def test_streams_get_only_what_the_pipeline_does_with_them():
    acls = pipeline_acls(build("wc", "wc-"), "User:job")
    literal = {(a.name, a.operation) for a in acls if a.pattern == "LITERAL"}
    assert ("wc-lines", "READ") in literal and ("wc-lines", "WRITE") not in literal
    assert ("wc-word-counts", "WRITE") in literal and ("wc-word-counts", "READ") not in literal
    assert ("wc-words", "READ") in literal and ("wc-words", "WRITE") in literal
    assert not any(op in ("CREATE", "DELETE", "ALTER") for _, op in literal)
    assert all(a.principal == "User:job" and a.host == "*" for a in acls)


def test_reset_adds_delete_on_the_prefix_only():
    plain = set(pipeline_acls(build("wc", "wc-"), "User:job"))
    with_reset = set(pipeline_acls(build("wc", "wc-"), "User:job", reset=True))
    assert [(a.resource, a.pattern, a.operation) for a in with_reset - plain] == [
        ("TOPIC", "PREFIXED", "DELETE")
    ]
