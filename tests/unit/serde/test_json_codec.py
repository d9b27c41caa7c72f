"""Compact UTF-8 JSON (serde/json_codec.py): strict JSON as the standard library writes it,
written by orjson where the two agree, and bytes that are not JSON refused saying what they are."""

from __future__ import annotations

import json
import uuid

import pytest

from framework.serde.codecs import DecodeError, EncodeError
from framework.serde.json_codec import decode_json, encode_json, encode_json_vetted


def test_json_is_compact_utf8():
    value = {"query": "café", "n": [1, 2.5, None, True]}
    data = encode_json(value)
    assert data == '{"query":"café","n":[1,2.5,null,true]}'.encode()
    assert decode_json(data) == value


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        {"s": {1, 2}},
        object(),
        "\ud800",
        {"a": [1, float("inf")]},
        {"n": None, "x": float("-inf")},
    ],
)
def test_json_refuses_what_other_readers_could_not_parse(value):
    with pytest.raises(EncodeError):
        encode_json(value)


@pytest.mark.parametrize(
    "value",
    [{"big": 2**70}, {1: "a", None: 2, False: 3}, {"n": None, "deep": [[[None]]]}, -(2**64)],
)
def test_json_encodes_what_the_standard_library_does(value):
    data = encode_json(value)
    assert json.loads(data) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{oops", "not JSON"),
        (b"", "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"\xc3\x01" + bytes(8), "declared without a schema"),
        (None, "tombstone"),
    ],
)
def test_undecodable_json_says_why(data, reason):
    with pytest.raises(DecodeError, match=reason):
        decode_json(data)


def test_a_vetted_document_is_written_as_encode_json_writes_it():
    value = {"word": "café", "counts": [1, 2.5, None, True], "nested": {"n": None}}
    assert encode_json_vetted(value) == encode_json(value)


def test_a_vetted_document_is_not_scanned_again_for_what_only_orjson_writes():
    """A piece holding a UUID beside another holding null: `encode_json` hands it to the
    standard library, which refuses the UUID; each piece was accepted on its own, so the
    document is written whole."""
    key = uuid.UUID(int=7)
    with pytest.raises(EncodeError):
        encode_json({"id": key, "other": None})
    data = encode_json_vetted({"id": key, "other": None})
    assert json.loads(data) == {"id": str(key), "other": None}


def test_a_vetted_document_deeper_than_orjson_writes_falls_back_to_the_standard_library():
    deep: list = [1]
    for _ in range(300):  # orjson refuses nesting past 255
        deep = [deep]
    assert json.loads(encode_json_vetted(deep)) == deep
