"""Bounds on decoding Avro that others wrote: what fastavro is handed has been vetted, so no
value, however small, makes it allocate, loop or recurse without bound.

fastavro trusts its input. An array's block count drives its loop, and items of `null` take
no bytes, so 2**40 of them fit in 6 bytes; skipping a writer-only field goes on past the end
of the bytes (booleans, floats and fixed values are skipped unchecked), so any block count
spins; a recursive type recurses in C until the stack ends (a segmentation fault). So:

- Each writer schema is vetted once, when first met (`bound`). It is refused when an array's
  items can take no bytes, when a record contains itself with no union, array or map between
  (no value of it is finite), or when its types nest deeper than MAX_DEPTH.
- A schema with no array, map or recursive type, whose values visit at most MAX_VALUES types,
  needs nothing per record: fastavro's work on any value is bounded by the schema.
- Any other schema gets a check of each value's bytes before fastavro reads them: a walk along
  the writer schema that reads what fastavro would (a skipping decoder, no values built) and
  refuses a block count larger than the bytes left could hold, a block whose byte size is not
  that of its items, values nested deeper than MAX_DEPTH, and more than MAX_VALUES +
  VALUES_PER_BYTE per byte of values that take no bytes of their own (records, nulls: a
  schema using one such type many times over). Recursive types are read to that depth rather
  than refused: trees and linked lists are valid Avro, and the walk is needed for arrays
  anyway.

A value that passes is one fastavro reads at the same positions, so each of its loops ends
within the bytes. A refusal raises `OutOfBounds`, whose message is the dead letter's reason;
bytes that end inside a value raise `Truncated` (one), where fastavro would raise EOFError.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from framework.errors import BadRecord

MAX_DEPTH = 100
"""Records, arrays and maps nested in one value, at most (fastavro recurses in C)."""

MAX_VALUES = 100_000
"""Values one decode may visit whatever its size (and no-byte values beyond VALUES_PER_BYTE)."""

VALUES_PER_BYTE = 16
"""Values that take no bytes (records, nulls) one decode may visit per byte of its body."""

Check = Callable[[bytes, int], int]
"""(data, offset of the Avro body) -> where the value ends; or OutOfBounds (Truncated)."""

_Skip = Callable[[bytes, int, int, list[int]], int]
"""(data, position, depth, [no-byte values visited]) -> position after the value."""

_PRIMITIVE_WIDTH = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_VARINTS = ("int", "long", "enum")
_SIZED = ("bytes", "string")
_PRIMITIVES = {*_PRIMITIVE_WIDTH, "int", "long", *_SIZED}
_RECORDS = ("record", "error")
_NAMED = (*_RECORDS, "enum", "fixed")
_COMPLEX = {*_NAMED, "array", "map"}
_MASK64 = (1 << 64) - 1
_VARINT, _LENGTH, _WIDTH, _CALL = range(4)  # how a record skips a field


class OutOfBounds(BadRecord):
    """A writer schema or a value beyond the bounds of decoding; the message says which."""

    def __init__(self, reason: str) -> None:
        super().__init__("decode", reason)


class Truncated(OutOfBounds):
    """Bytes that end inside a value: fastavro's EOFError, found before fastavro reads."""

    def __init__(self) -> None:
        super().__init__("the bytes end inside a value")


def bound(schema: Any, named: Mapping[str, Any], label: str) -> Check | None:
    """The check each value of the parsed writer `schema` needs before fastavro reads it: None
    when it needs none; a check that always raises when the schema is refused, so a caller
    that caches it refuses the schema's values without vetting it again. `named` holds the
    named types its references name; `label` names it in reasons ("writer schema id 7")."""
    try:
        return _Vetting(named, label).check(schema)
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
    size, pos = _varint(data, pos)
    if size < 0:
        raise OutOfBounds(f"a negative length {size}")
    pos += size
    if pos > len(data):
        raise Truncated
    return pos


def _skip_width(width: int) -> _Skip:
    def skip(data: bytes, pos: int, depth: int, spent: list[int]) -> int:
        pos += width
        if pos > len(data):
            raise Truncated
        return pos

    return skip


def _too_deep() -> OutOfBounds:
    return OutOfBounds(f"values nested deeper than {MAX_DEPTH}")


class _Vetting:
    """One writer schema, vetted and compiled into its check."""

    def __init__(self, named: Mapping[str, Any], label: str) -> None:
        self.named = named
        self.label = label
        self.defs: dict[str, Any] = {}  # named types the schema reaches, by full name
        self.path: set[str] = set()
        self.arrays: list[Any] = []  # item types of every array
        self.recursive = False
        self.blocks = False
        self.widths: dict[str, float] = {}  # least bytes a value of each named type takes
        self.memo: dict[tuple[str, str], Any] = {}  # (property, name) -> value
        self.compiled: dict[str, _Skip] = {}
        self.cells: dict[str, list[_Skip]] = {}  # late-bound recursive references

    def refused(self, why: str) -> OutOfBounds:
        return OutOfBounds(f"{self.label} refused: {why}")

    def check(self, schema: Any) -> Check | None:
        self._collect(schema)
        self._least_widths()
        for name, width in self.widths.items():
            if width == math.inf:
                raise self.refused(
                    f"record {name} contains itself with no union, array or map between, "
                    "so no value of it is finite"
                )
        for items in self.arrays:
            if self._width(items) == 0:
                raise self.refused(
                    f"its array items ({_describe(items)}) take no bytes, so a block count "
                    "could claim any number of them"
                )
        depth = self._depth(schema)
        if depth > MAX_DEPTH:
            raise self.refused(f"its types nest {depth} deep, more than {MAX_DEPTH}")
        if not (self.recursive or self.blocks) and self._work(schema) <= MAX_VALUES:
            return None
        return self._walker(schema)

    # -- what a type is ------------------------------------------------------------------

    def _resolve(self, node: Any) -> tuple[str, Any, str | None]:
        """(kind, definition, full name of a named type or None) of a parsed type."""
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node, node, None
            found = self.named.get(node)
            if not isinstance(found, dict):
                raise self.refused(f"it names type {node!r}, which it does not define")
            return self._resolve(found)
        if isinstance(node, list):
            return "union", node, None
        if isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and (kind in _PRIMITIVES or kind in _COMPLEX):
                return kind, node, node.get("name") if kind in _NAMED else None
            if isinstance(kind, (str, dict, list)):  # a type written as {"type": <type>}
                return self._resolve(kind)
        raise self.refused(f"{_describe(node)} is not an Avro type")

    def _collect(self, node: Any) -> None:
        """Named types, recursion and arrays of the schema (a depth-first walk)."""
        kind, body, name = self._resolve(node)
        if name is not None:
            if name in self.path:
                self.recursive = True
                return
            if name in self.defs:
                return
            self.defs[name] = body
            self.path.add(name)
        if kind in _RECORDS:
            for field in body["fields"]:
                self._collect(field["type"])
        elif kind == "union":
            for branch in body:
                self._collect(branch)
        elif kind == "array":
            self.blocks = True
            self.arrays.append(body["items"])
            self._collect(body["items"])
        elif kind == "map":
            self.blocks = True
            self._collect(body["values"])
        elif kind == "fixed" and not (isinstance(body["size"], int) and body["size"] >= 0):
            raise self.refused(f"fixed {name} has size {body['size']!r}")
        if name is not None:
            self.path.discard(name)

    def _least_widths(self) -> None:
        """The least bytes a value of each named type takes (inf: no value is finite), as the
        least fixpoint over the types, which may refer to each other."""
        self.widths = dict.fromkeys(self.defs, math.inf)
        ordered = list(reversed(self.defs.items()))  # types used before their users, mostly
        for _ in range(len(ordered) + 1):
            changed = False
            for name, body in ordered:
                width = self._width_of(body)
                if width < self.widths[name]:
                    self.widths[name], changed = width, True
            if not changed:
                return

    def _width(self, node: Any) -> float:
        kind, body, name = self._resolve(node)
        return self.widths[name] if name is not None else self._width_of(body)

    def _width_of(self, node: Any) -> float:
        kind, body, _ = self._resolve(node)
        if kind in _PRIMITIVE_WIDTH:
            return _PRIMITIVE_WIDTH[kind]
        if kind == "fixed":
            return body["size"]
        if kind in _RECORDS:
            return sum(self._width(f["type"]) for f in body["fields"])
        if kind == "union":
            return 1 + min((self._width(b) for b in body), default=math.inf)
        return 1  # a varint, a length, or an array's or map's closing zero

    def _named(self, prop: str, node: Any, compute: Callable[[str, Any], Any]) -> Any:
        """`compute(kind, body)` of a type, remembered per named type (a schema may use one
        named type many times: computing it once keeps vetting linear in the schema)."""
        kind, body, name = self._resolve(node)
        if name is None:
            return compute(kind, body)
        key = (prop, name)
        if key not in self.memo:
            self.memo[key] = 0  # a recursive reference counts nothing here
            self.memo[key] = compute(kind, body)
        return self.memo[key]

    def _depth(self, node: Any) -> int:
        """Records, arrays and maps nested in the type (a recursive reference: 0)."""

        def compute(kind: str, body: Any) -> int:
            if kind in _RECORDS:
                return 1 + max((self._depth(f["type"]) for f in body["fields"]), default=0)
            if kind == "union":
                return max((self._depth(b) for b in body), default=0)
            if kind == "array":
                return 1 + self._depth(body["items"])
            if kind == "map":
                return 1 + self._depth(body["values"])
            return 0

        return self._named("depth", node, compute)

    def _work(self, node: Any) -> int:
        """Types fastavro visits to read one value, at most (no arrays or recursion here)."""

        def compute(kind: str, body: Any) -> int:
            if kind in _RECORDS:
                total = 1 + sum(self._work(f["type"]) for f in body["fields"])
            elif kind == "union":
                total = 1 + max((self._work(b) for b in body), default=0)
            else:
                total = 1
            return min(total, MAX_VALUES + 1)

        return self._named("work", node, compute)

    def _nothing(self, node: Any) -> int:
        """Values in a type that takes no bytes (its records, nulls and empty fixed)."""

        def compute(kind: str, body: Any) -> int:
            if kind in _RECORDS:
                return min(1 + sum(self._nothing(f["type"]) for f in body["fields"]), 2**62)
            return 1

        return self._named("nothing", node, compute)

    def _constant(self, node: Any) -> int | None:
        """The width of a type whose every value takes the same bytes, else None."""

        def compute(kind: str, body: Any) -> int | None:
            if kind in _PRIMITIVE_WIDTH:
                return _PRIMITIVE_WIDTH[kind]
            if kind == "fixed":
                return body["size"]
            if kind in _RECORDS:
                widths = [self._constant(f["type"]) for f in body["fields"]]
                return None if None in widths else sum(w for w in widths if w is not None)
            return None

        return self._named("constant", node, compute)

    # -- the walk ------------------------------------------------------------------------

    def _walker(self, schema: Any) -> Check:
        top = self._compile(schema)
        nothing = self._nothing(schema) if top is None else 0
        label = self.label

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
        if self._width(node) == 0:
            return None
        kind, body, name = self._resolve(node)
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
        if kind in _VARINTS:
            return _skip_varint
        if kind in _SIZED:
            return _skip_sized
        if kind in _PRIMITIVE_WIDTH:
            return _skip_width(_PRIMITIVE_WIDTH[kind])
        if kind == "fixed":
            return _skip_width(body["size"])
        if kind in _RECORDS:
            return self._record(body)
        if kind == "union":
            return self._union(body)
        if kind == "array":
            return self._blocks(body["items"], keyed=False)
        if kind == "map":
            return self._blocks(body["values"], keyed=True)
        raise self.refused(f"type {kind!r} is not one it can read")

    def _record(self, body: Any) -> _Skip:
        """A record's fields in order; varints, lengths and fixed widths are skipped inline
        (a call per field doubled the cost of a walk)."""
        ops: list[tuple[int, Any]] = []  # (_VARINT | _LENGTH | _WIDTH | _CALL, argument)
        nothing = 1
        for field in body["fields"]:
            skip = self._compile(field["type"])
            kind = self._resolve(field["type"])[0]
            if skip is None:
                nothing += self._nothing(field["type"])
            elif kind in _VARINTS:
                ops.append((_VARINT, None))
            elif kind in _SIZED:
                ops.append((_LENGTH, None))
            elif kind in _PRIMITIVE_WIDTH or kind == "fixed":
                width = self._constant(field["type"])
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
            branches.append((skip, self._nothing(branch) if skip is None else 0))
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
        nothing = self._nothing(items) if item is None else 0
        least = int(self._width(items)) + (1 if keyed else 0)
        constant = None if keyed else self._constant(items)
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


def _describe(node: Any) -> str:
    text = json.dumps(node, default=str) if not isinstance(node, str) else node
    return text if len(text) <= 80 else text[:77] + "..."
