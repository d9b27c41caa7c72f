"""Bounds on decoding Avro others wrote (framework/serde/bounds.py): the check each writer
schema gets once vetted (tests/unit/serde/test_vetting.py), and the walk that refuses a value's
bytes before fastavro could allocate, loop or recurse without bound on them. The Confluent and
single-object decoders that use it: tests/unit/serde/test_confluent.py, test_avro_codec.py; in a
running job: tests/integration/test_confluent_format.py."""

from __future__ import annotations

import io

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import parse_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.serde.bounds import MAX_DECIMAL_BYTES, MAX_DEPTH, OutOfBounds, Truncated, bound


def zz(n: int) -> bytes:
    """The Avro (zig-zag varint) encoding of a long."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def vet(schema):
    named: dict = {}
    parsed = parse_schema(schema, named_schemas=named)
    return parsed, bound(parsed, named, "writer schema id 7")


def refusal(schema) -> str:
    _, check = vet(schema)
    assert check is not None
    with pytest.raises(OutOfBounds) as caught:
        check(b"\x00" * 8, 0)
    return str(caught.value)


def record(name, *fields):
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


WORD_COUNT = record("wordcount.WordCount", ("word", "string"), ("count", "long"))
NODE = record("Node", ("value", "int"), ("next", ["null", "Node"]))
TREE = record("Tree", ("label", "string"), ("kids", {"type": "array", "items": "Tree"}))


def linked(depth: int) -> bytes:
    """A NODE list `depth` records deep."""
    return (zz(1) + zz(1)) * (depth - 1) + zz(1) + zz(0)


# -- what vetting makes of a writer schema (tests/unit/serde/test_vetting.py) -----------------


def test_a_schema_fastavro_bounds_by_itself_gets_no_check_and_a_refused_one_a_refusal():
    assert vet(WORD_COUNT)[1] is None
    reason = refusal({"type": "array", "items": "null"})
    assert reason.startswith("writer schema id 7 refused: its array items (null) take no bytes")


def test_types_that_refer_to_each_other_are_walked_through_each_other():
    a = record("A", ("b", ["null", record("B", ("a", "A"))]))
    parsed, check = vet(a)
    assert check(zz(1) + zz(1) + zz(0), 0) == 3
    with pytest.raises(OutOfBounds, match="nested deeper"):
        check((zz(1) + zz(1)) * 200 + zz(0), 0)


def test_a_schema_that_expands_to_a_bomb_of_values_taking_no_bytes_is_refused_per_value():
    """Named types used twice at each of 20 levels: 2**20 empty records in a 0-byte value."""
    schema = record("Z0")
    for level in range(1, 21):
        schema = record(f"Z{level}", ("a", schema), ("b", f"Z{level - 1}"))
    _, check = vet(schema)
    assert check is not None
    with pytest.raises(OutOfBounds, match="values that take no bytes in a 0-byte body"):
        check(b"", 0)


def test_a_decimal_longer_than_the_bound_is_refused_before_fastavro_converts_it():
    """fastavro turns a decimal's bytes into a Decimal in time quadratic in their length (12 s
    for 400 KB)."""
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
    parsed, check = vet(record("Price", ("amount", decimal), ("currency", "string")))
    fine = zz(2) + b"\x01\x00" + zz(3) + b"EUR"
    assert check(fine, 0) == len(fine)
    assert str(schemaless_reader(io.BytesIO(fine), parsed)["amount"]) == "2.56"
    long = zz(MAX_DECIMAL_BYTES + 1) + bytes(MAX_DECIMAL_BYTES + 1) + zz(0)
    with pytest.raises(OutOfBounds, match=f"a decimal of {MAX_DECIMAL_BYTES + 1} bytes, more"):
        check(long, 0)


def test_a_refused_schema_refuses_every_value_with_the_same_reason():
    _, check = vet({"type": "array", "items": "null"})
    reasons = set()
    for data in (b"", zz(2**40) + zz(0), zz(0)):
        with pytest.raises(OutOfBounds) as caught:
            check(data, 0)
        reasons.add(str(caught.value))
    assert len(reasons) == 1


# -- the walk over a value's bytes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "body"),
    [
        ({"type": "array", "items": "boolean"}, zz(2**40) + b"\x01" + zz(0)),
        ({"type": "array", "items": "long"}, zz(-(2**40)) + zz(3) + b"\x01\x02\x03" + zz(0)),
        ({"type": "map", "values": "null"}, zz(2**40) + zz(1) + b"k" + zz(0)),
        ({"type": "array", "items": {"type": "fixed", "name": "F", "size": 16}}, zz(3) + bytes(40)),
    ],
)
def test_a_block_count_more_than_the_bytes_left_can_hold_is_refused_before_fastavro(schema, body):
    _, check = vet(schema)
    with pytest.raises(OutOfBounds, match=r"a block of \d+ .* cannot fit in the \d+ bytes left"):
        check(body, 0)


def test_a_writer_only_field_that_fastavro_would_skip_forever_is_refused():
    """fastavro skips booleans without looking for the end: this block count would spin."""
    junk = {"name": "junk", "type": {"type": "array", "items": "boolean"}}
    _, check = vet({**WORD_COUNT, "fields": [*WORD_COUNT["fields"], junk]})
    body = zz(1) + b"a" + zz(1) + zz(2**40) + zz(0)
    with pytest.raises(OutOfBounds, match=r"a block of 1099511627776 array items .*id 7\)$"):
        check(body, 0)


def test_a_block_whose_byte_size_is_not_its_items_is_refused():
    """fastavro reads a negative-count block item by item but skips it by its size: the two
    must agree, or the walk would vouch for bytes fastavro reads otherwise."""
    parsed, check = vet({"type": "array", "items": "long"})
    honest = zz(-2) + zz(2) + zz(5) + zz(-6) + zz(0)
    assert check(honest, 0) == len(honest)
    assert schemaless_reader(io.BytesIO(honest), parsed) == [5, -6]
    for lie in (zz(-2) + zz(3) + zz(5) + zz(-6) + zz(0), zz(-2) + zz(-1) + zz(5) + zz(6) + zz(0)):
        with pytest.raises(OutOfBounds, match="says it takes"):
            check(lie, 0)


def test_values_nested_deeper_than_the_bound_are_refused_and_the_bound_itself_is_not():
    parsed, check = vet(NODE)
    assert check(linked(MAX_DEPTH), 0) == len(linked(MAX_DEPTH))
    with pytest.raises(OutOfBounds, match=f"values nested deeper than {MAX_DEPTH}"):
        check(linked(MAX_DEPTH + 1), 0)
    with pytest.raises(OutOfBounds, match="nested deeper"):  # the crash of fastavro in C
        check(linked(5000), 0)


@pytest.mark.parametrize(
    ("items", "body", "reason"),
    [
        ("long", zz(1) + b"\xff" * 10 + b"\x01" + zz(0), "a varint longer than 10 bytes"),
        (record("R", ("v", "long")), zz(1) + b"\xff" * 10 + b"\x01" + zz(0), "longer than 10"),
        (record("S", ("v", "string")), zz(1) + zz(-5) + zz(0), "a negative length -5"),
        ("string", zz(1) + zz(-5) + zz(0), "a negative length -5"),
        (["null", "string"], zz(1) + zz(7) + zz(0), "branch 7 of a union of 2"),
        (["null", "string"], zz(1) + zz(-1) + zz(0), "branch -1 of a union of 2"),
    ],
)
def test_bytes_fastavro_would_read_otherwise_are_refused(items, body, reason):
    """An 11-byte varint overflows fastavro's 64 bits; a negative length reads to the end; a
    negative union branch counts from the end of the list in fastavro."""
    _, check = vet({"type": "array", "items": items})
    with pytest.raises(OutOfBounds, match=reason):
        check(body, 0)


@pytest.mark.parametrize(
    ("schema", "whole"),
    [
        (TREE, zz(1) + b"a" + zz(1) + zz(1) + b"b" + zz(0) + zz(0)),
        (
            record(
                "W", ("ns", {"type": "array", "items": "int"}), ("x", "double"), ("b", "boolean")
            ),
            zz(1) + zz(5) + zz(0) + bytes(8) + b"\x01",
        ),
        ({"type": "array", "items": "string"}, zz(2) + zz(1) + b"a" + zz(2) + b"bc" + zz(0)),
    ],
)
def test_bytes_that_end_inside_a_value_are_truncated_before_fastavro_reads_them(schema, whole):
    _, check = vet(schema)
    assert check(whole, 0) == len(whole)
    for cut in range(len(whole)):  # a block count cut off from its items cannot fit
        with pytest.raises(OutOfBounds) as caught:
            check(whole[:cut], 0)
        assert isinstance(caught.value, Truncated) or "cannot fit" in str(caught.value)


# -- what passes is what fastavro reads, at the same positions -----------------------------

EMPTY = record("Empty")
RICH = record(
    "Rich",
    ("name", "string"),
    ("n", "long"),
    ("ok", "boolean"),
    ("x", "double"),
    ("kind", {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}),
    ("id", {"type": "fixed", "name": "Id", "size": 4}),
    ("blob", "bytes"),
    ("tags", {"type": "map", "values": "null"}),
    ("weights", {"type": "array", "items": "float"}),
    ("words", {"type": "array", "items": "string"}),
    ("opt", ["null", "int", "string", EMPTY]),
    ("kids", {"type": "array", "items": "Rich"}),
    ("next", ["null", "Rich"]),
)
PARSED_RICH = parse_schema(RICH)
WITHOUT_KIDS = {**RICH, "fields": [f for f in RICH["fields"] if f["name"] not in ("kids", "tags")]}


def rich_values():
    scalars = st.fixed_dictionaries(
        {
            "name": st.text(max_size=5),
            "n": st.integers(-(2**63), 2**63 - 1),
            "ok": st.booleans(),
            "x": st.floats(allow_nan=False),
            "kind": st.sampled_from(["A", "B", "C"]),
            "id": st.binary(min_size=4, max_size=4),
            "blob": st.binary(max_size=5),
            "tags": st.dictionaries(st.text(max_size=3), st.none(), max_size=3),
            "weights": st.lists(st.just(0.5), max_size=4),
            "words": st.lists(st.text(max_size=70), max_size=3),
            "opt": st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.just({})),
        }
    )
    return st.recursive(
        scalars.map(lambda v: {**v, "kids": [], "next": None}),
        lambda inner: st.tuples(scalars, st.lists(inner, max_size=2), st.none() | inner).map(
            lambda t: {**t[0], "kids": t[1], "next": t[2]}
        ),
        max_leaves=6,
    )


def encode(value) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, PARSED_RICH, value)
    return out.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rich_values())
def test_every_value_a_writer_writes_passes_and_decodes_unchanged(value):
    named: dict = {}
    parsed = parse_schema(RICH, named_schemas=named)
    check = bound(parsed, named, "writer schema Rich")
    data = b"\x00hdr" + encode(value)
    assert check(data, 4) == len(data)
    assert schemaless_reader(io.BytesIO(data[4:]), PARSED_RICH) == value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rich_values(), st.data())
def test_bytes_the_walk_accepts_are_read_by_fastavro_to_the_same_end(value, draw):
    """Mutated values: whatever the walk lets through, fastavro reads (or skips, against a
    reader without some fields) to exactly where the walk ended, so every loop of fastavro's
    was one the walk bounded."""
    data = bytearray(encode(value))
    for _ in range(draw.draw(st.integers(1, 3))):
        at = draw.draw(st.integers(0, max(len(data) - 1, 0)))
        data[at:at] = draw.draw(st.binary(min_size=0, max_size=3))
        if data:
            del data[draw.draw(st.integers(0, len(data) - 1))]
    data = bytes(data)
    named: dict = {}
    parsed = parse_schema(RICH, named_schemas=named)
    try:
        end = bound(parsed, named, "Rich")(data, 0)
    except OutOfBounds:
        return
    for reader in (None, parse_schema(WITHOUT_KIDS)):
        buf = io.BytesIO(data)
        try:
            schemaless_reader(buf, PARSED_RICH, reader)
        except Exception:  # noqa: S112 - bad UTF-8, an enum index: fastavro says so itself
            continue
        assert buf.tell() == end
