"""Bounds on decoding Avro that others wrote: what fastavro is handed has been vetted, so no
value, however small, makes it allocate, loop or recurse without bound.

fastavro trusts its input. An array's block count drives its loop, and items of `null` take
no bytes, so 2**40 of them fit in 6 bytes; skipping a writer-only field goes on past the end
of the bytes (booleans, floats and fixed values are skipped unchecked), so any block count
spins; a recursive type recurses in C until the stack ends (a segmentation fault). So:

- Each writer schema is vetted once, when first met (`bound`, with framework/serde/vetting.py).
  It is refused when an array's items can take no bytes, when a record contains itself with no
  union, array or map between (no value of it is finite), when its types nest deeper than
  MAX_DEPTH, or when a decimal of fixed size is longer than MAX_DECIMAL_BYTES.
- A schema with no array, map, decimal in bytes or recursive type, whose values visit at most
  MAX_VALUES types, needs nothing per record: fastavro's work on any value is bounded by the
  schema.
- Any other schema gets a check of each value's bytes before fastavro reads them: a walk along
  the writer schema that reads what fastavro would (a skipping decoder, no values built) and
  refuses a block count larger than the bytes left could hold, a block whose byte size is not
  that of its items, values nested deeper than MAX_DEPTH, a decimal longer than
  MAX_DECIMAL_BYTES (fastavro converts it in quadratic time), and more than MAX_VALUES +
  VALUES_PER_BYTE per byte of values that take no bytes of their own (records, nulls: a
  schema using one such type many times over). Recursive types are read to that depth rather
  than refused: trees and linked lists are valid Avro, and the walk is needed for arrays
  anyway.

A value that passes is one fastavro reads at the same positions, so each of its loops ends
within the bytes. A refusal raises `OutOfBounds`, whose message is the dead letter's reason;
bytes that end inside a value raise `Truncated` (one), where fastavro would raise EOFError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from framework.serde.vetting import (
    MAX_DECIMAL_BYTES,
    MAX_DEPTH,
    MAX_VALUES,
    PRIMITIVE_WIDTH,
    RECORDS,
    SIZED,
    VALUES_PER_BYTE,
    VARINTS,
    OutOfBounds,
    Truncated,
    Vetting,
    is_decimal,
)

__all__ = [
    "MAX_DECIMAL_BYTES",
    "MAX_DEPTH",
    "Check",
    "OutOfBounds",
    "Truncated",
    "bound",
    "refusal",
]

Check = Callable[[bytes, int], int]
"""(data, offset of the Avro body) -> where the value ends; or OutOfBounds (Truncated)."""

_Skip = Callable[[bytes, int, int, list[int]], int]
"""(data, position, depth, [no-byte values visited]) -> position after the value."""

_MASK64 = (1 << 64) - 1
_VARINT, _LENGTH, _WIDTH, _CALL = range(4)  # how a record skips a field


def bound(schema: Any, named: Mapping[str, Any], label: str) -> Check | None:
    """The check each value of the parsed writer `schema` needs before fastavro reads it: None
    when it needs none; a check that always raises when the schema is refused, so a caller
    that caches it refuses the schema's values without vetting it again. `named` holds the
    named types its references name; `label` names it in reasons ("writer schema id 7")."""
    try:
        vetting = Vetting(named, label)
        return _Walk(vetting).check(schema) if vetting.vet(schema) else None
    except OutOfBounds as refused:
        reason = str(refused)
    except RecursionError:
        reason = f"{label} refused: its types nest too deeply to vet"
    except Exception as exc:  # a shape fastavro parsed but nothing here expects
        reason = f"{label} refused: cannot vet it ({type(exc).__name__}: {exc})"
    return refusal(reason)


def refusal(reason: str) -> Check:
    """The check of a refused writer schema: every value raises OutOfBounds(reason)."""

    def refuse(data: bytes, start: int) -> int:
        raise OutOfBounds(reason)

    return refuse


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(the zig-zag long at `pos`, the position after it), as fastavro's C reader reads it
    (64 bits); IndexError past the end. Avro writes at most 10 bytes: more is refused."""
    b = data[pos]
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise OutOfBounds("a varint longer than 10 bytes")
        pos += 1
        b = data[pos]
        n |= (b & 0x7F) << shift
        shift += 7
    n &= _MASK64
    return (n >> 1) ^ -(n & 1), pos + 1


def _skip_varint(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
    return _varint(data, pos)[1]


def _skip_sized(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
    first = data[pos]
    if first < 0x80 and not first & 1:  # a length under 64, in one byte: most of them
        pos += 1 + (first >> 1)
    else:
        size, pos = _varint(data, pos)
        if size < 0:
            raise OutOfBounds(f"a negative length {size}")
        pos += size
    if pos > len(data):
        raise Truncated
    return pos


def _skip_decimal(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
    size = _varint(data, pos)[0]
    if size > MAX_DECIMAL_BYTES:
        raise OutOfBounds(f"a decimal of {size} bytes, more than {MAX_DECIMAL_BYTES}")
    return _skip_sized(data, pos, depth, spent)


def _skip_width(width: int) -> _Skip:
    def skip(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
        pos += width
        if pos > len(data):
            raise Truncated
        return pos

    return skip


def _too_deep() -> OutOfBounds:
    return OutOfBounds(f"values nested deeper than {MAX_DEPTH}")


class _Walk:
    """A vetted writer schema compiled into the check of its values: one skipper per type,
    named types compiled once (a recursive reference bound once its type is)."""

    def __init__(self, vetting: Vetting) -> None:
        self.vetting = vetting
        self.path: set[str] = set()
        self.compiled: dict[str, _Skip] = {}
        self.cells: dict[str, list[_Skip]] = {}  # late-bound recursive references

    def check(self, schema: Any) -> Check:
        top = self._compile(schema)
        nothing = self.vetting.nothing(schema) if top is None else 0
        label = self.vetting.label

        def check(data: bytes, start: int) -> int:
            spent = [nothing]
            try:
                end = start if top is None else top(data, start, 0, spent)
            except IndexError:
                raise Truncated from None
            except Truncated:
                raise
            except OutOfBounds as exc:
                raise OutOfBounds(f"{exc} ({label})") from None
            allowed = MAX_VALUES + VALUES_PER_BYTE * (len(data) - start)
            if spent[0] > allowed:
                raise OutOfBounds(
                    f"{spent[0]} values that take no bytes in a {len(data) - start}-byte "
                    f"body, more than {allowed} ({label})"
                )
            return end

        return check

    def _compile(self, node: Any) -> _Skip | None:
        """The skipper of a type, None for a type that takes no bytes."""
        if self.vetting.width(node) == 0:
            return None
        kind, body, name = self.vetting.resolve(node)
        if name is None:
            return self._compile_kind(kind, body)
        if name in self.compiled:
            return self.compiled[name]
        if name in self.path:  # a recursive reference: bound once its type is compiled
            cell = self.cells.setdefault(name, [])

            def recur(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
                return cell[0](data, pos, depth, spent)

            return recur
        self.path.add(name)
        skip = self._compile_kind(kind, body)
        self.path.discard(name)
        self.compiled[name] = skip
        self.cells.setdefault(name, []).append(skip)
        return skip

    def _compile_kind(self, kind: str, body: Any) -> _Skip:
        if kind in VARINTS:
            return _skip_varint
        if kind in SIZED:
            return _skip_decimal if is_decimal(body) else _skip_sized
        if kind in PRIMITIVE_WIDTH:
            return _skip_width(PRIMITIVE_WIDTH[kind])
        if kind == "fixed":
            return _skip_width(body["size"])
        if kind in RECORDS:
            return self._record(body)
        if kind == "union":
            return self._union(body)
        if kind == "array":
            return self._blocks(body["items"], keyed=False)
        if kind == "map":
            return self._blocks(body["values"], keyed=True)
        raise self.vetting.refused(f"type {kind!r} is not one it can read")

    def _record(self, body: Any) -> _Skip:
        """A record's fields in order; varints, lengths and fixed widths are skipped inline
        (a call per field doubled the cost of a walk)."""
        ops: list[tuple[int, Any]] = []  # (_VARINT | _LENGTH | _WIDTH | _CALL, argument)
        nothing = 1
        for field in body["fields"]:
            skip = self._compile(field["type"])
            kind = self.vetting.resolve(field["type"])[0]
            if skip is None:
                nothing += self.vetting.nothing(field["type"])
            elif kind in VARINTS:
                ops.append((_VARINT, None))
            elif skip is _skip_sized:
                ops.append((_LENGTH, None))
            elif kind in PRIMITIVE_WIDTH or kind == "fixed":
                width = self.vetting.constant(field["type"])
                if ops and ops[-1][0] == _WIDTH:
                    width += ops.pop()[1]
                ops.append((_WIDTH, width))
            else:
                ops.append((_CALL, skip))
        steps = tuple(ops)

        def skip_record(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep()
            spent[0] += nothing
            for op, arg in steps:
                if op == _VARINT:
                    end = pos + 9
                    while data[pos] & 0x80:
                        if pos == end:
                            raise OutOfBounds("a varint longer than 10 bytes")
                        pos += 1
                    pos += 1
                elif op == _CALL:
                    pos = arg(data, pos, depth, spent)
                elif op == _LENGTH:
                    pos = _skip_sized(data, pos, depth, spent)
                else:
                    pos += arg
                    if pos > len(data):
                        raise Truncated
            return pos

        return skip_record

    def _union(self, body: Any) -> _Skip:
        branches = []
        for branch in body:
            skip = self._compile(branch)
            branches.append((skip, self.vetting.nothing(branch) if skip is None else 0))
        count = len(branches)

        def skip_union(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
            index, pos = _varint(data, pos)
            if not 0 <= index < count:
                raise OutOfBounds(f"branch {index} of a union of {count}")
            skip, nothing = branches[index]
            if skip is None:
                spent[0] += nothing
                return pos
            return skip(data, pos, depth, spent)

        return skip_union

    def _blocks(self, items: Any, *, keyed: bool) -> _Skip:
        """An array's or a map's blocks: each a count, its byte size when the count is
        negative, then the items (a map's each after its string key)."""
        item = self._compile(items)
        nothing = self.vetting.nothing(items) if item is None else 0
        least = int(self.vetting.width(items)) + (1 if keyed else 0)
        constant = None if keyed else self.vetting.constant(items)
        what = "map entries" if keyed else "array items"

        def skip_blocks(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep()
            while True:
                count, pos = _varint(data, pos)
                if count == 0:
                    return pos
                end = None
                if count < 0:
                    count = -count
                    size, pos = _varint(data, pos)
                    end = pos + size
                left = len(data) - pos
                if count * least > left:
                    raise OutOfBounds(
                        f"a block of {count} {what} (each at least {least} bytes) cannot fit "
                        f"in the {left} bytes left"
                    )
                begin = pos
                if constant is not None:
                    pos += count * constant
                elif item is _skip_sized and not keyed:  # strings: a call saved per item
                    for _ in range(count):  # past the end, the next count's read says so
                        first = data[pos]
                        if first < 0x80 and not first & 1:
                            pos += 1 + (first >> 1)
                        else:
                            pos = _skip_sized(data, pos, depth, spent)
                else:
                    spent[0] += nothing * count
                    for _ in range(count):
                        if keyed:
                            pos = _skip_sized(data, pos, depth, spent)
                        if item is not None:
                            pos = item(data, pos, depth, spent)
                if end is not None and pos != end:
                    raise OutOfBounds(
                        f"a block of {what} says it takes {end - begin} bytes but they "
                        f"take {pos - begin}"
                    )

        return skip_blocks
