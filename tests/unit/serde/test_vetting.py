"""Vetting a writer schema once, when first met (framework/serde/vetting.py): which schemas are
refused, with what reason, and which need a walk of each value's bytes
(tests/unit/serde/test_bounds.py) before fastavro reads it."""

from __future__ import annotations

import pytest
from fastavro.schema import parse_schema

from framework.serde.vetting import MAX_DECIMAL_BYTES, MAX_DEPTH, OutOfBounds, Vetting


def record(name, *fields):
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


def walked(schema) -> bool:
    """Whether values of `schema` need a walk; OutOfBounds when it is refused."""
    named: dict = {}
    parsed = parse_schema(schema, named_schemas=named)
    return Vetting(named, "writer schema id 7").vet(parsed)


def refusal(schema) -> str:
    with pytest.raises(OutOfBounds) as caught:
        walked(schema)
    assert caught.value.stage == "decode"
    return str(caught.value)


WORD_COUNT = record("wordcount.WordCount", ("word", "string"), ("count", "long"))


@pytest.mark.parametrize(
    "items",
    [
        "null",
        {"type": "fixed", "name": "Nothing", "size": 0},
        record("Empty"),
        record("Nulls", ("a", "null"), ("b", record("Inner", ("c", "null")))),
    ],
)
def test_an_array_whose_items_take_no_bytes_is_refused(items):
    reason = refusal({"type": "array", "items": items})
    assert reason.startswith("writer schema id 7 refused: its array items")
    assert "take no bytes, so a block count could claim any number of them" in reason


def test_zero_width_items_are_refused_wherever_the_array_is_even_where_a_reader_skips_it():
    reason = refusal(record("W", ("word", "string"), ("junk", {"type": "array", "items": "null"})))
    assert "array items (null) take no bytes" in reason


def test_a_map_of_values_that_take_no_bytes_is_read_its_keys_take_bytes():
    assert walked({"type": "map", "values": "null"})  # a set of strings


def test_a_record_that_contains_itself_with_nothing_between_has_no_finite_value():
    reason = refusal(record("Loop", ("n", "int"), ("again", "Loop")))
    assert "record Loop contains itself with no union, array or map between" in reason


def test_types_that_refer_to_each_other_are_finite_through_a_union_or_an_array():
    assert walked(record("A", ("b", ["null", record("B", ("a", "A"))])))  # B is never refused
    assert walked(record("Tree", ("kids", {"type": "array", "items": "Tree"})))


def test_types_nested_deeper_than_the_bound_are_refused_and_the_bound_itself_is_not():
    def nested(depth: int):
        schema = record("L0", ("v", "int"))
        for level in range(1, depth):
            schema = record(f"L{level}", ("inner", schema))
        return schema

    assert not walked(nested(MAX_DEPTH))
    assert f"its types nest {MAX_DEPTH + 1} deep, more than {MAX_DEPTH}" in refusal(
        nested(MAX_DEPTH + 1)
    )


def test_a_schema_with_no_array_map_decimal_or_recursion_needs_no_walk():
    assert not walked(WORD_COUNT)
    assert not walked(record("Opt", ("a", ["null", "string", WORD_COUNT]), ("b", "double")))


@pytest.mark.parametrize(
    "schema",
    [
        record("Node", ("value", "int"), ("next", ["null", "Node"])),
        {"type": "array", "items": "int"},
        {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
    ],
)
def test_recursion_arrays_and_decimals_in_bytes_are_walked_not_refused(schema):
    assert walked(schema)


def test_a_schema_that_expands_to_more_values_than_the_bound_is_walked():
    """Named types used twice at each of 20 levels: 2**20 empty records in a 0-byte value, yet
    vetting visits each type once."""
    schema = record("Z0")
    for level in range(1, 21):
        schema = record(f"Z{level}", ("a", schema), ("b", f"Z{level - 1}"))
    assert walked(schema)
    assert not walked(record("Z1", ("a", record("Z0")), ("b", "Z0")))


def test_a_decimal_of_fixed_size_longer_than_the_bound_is_refused():
    size = MAX_DECIMAL_BYTES + 1
    fixed = {"type": "fixed", "name": "Big", "size": size, "logicalType": "decimal", "precision": 9}
    assert f"decimal Big is {size} bytes, more than {MAX_DECIMAL_BYTES}" in refusal(fixed)
    assert not walked({**fixed, "size": 8})
