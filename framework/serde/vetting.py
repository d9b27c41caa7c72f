"""What a writer schema is, as far as bounding its decoding goes (framework/serde/bounds.py):
the named types it reaches, whether it recurses or holds arrays, maps or decimals in bytes,
the least bytes a value of each type takes (a least fixpoint: types may refer to each other),
how deep its types nest and how many types one value visits. A schema fastavro cannot read
within bounds is refused with `OutOfBounds`, whose message is the dead letter's reason.

Named types a schema uses many times over are computed once each, so vetting stays linear in
the schema however large the values it describes.
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

MAX_DECIMAL_BYTES = 4096
"""Bytes of one decimal, at most (9,860 digits): fastavro's conversion takes time quadratic in
them (0.8 s for 100 KB, 12 s for 400 KB)."""

PRIMITIVE_WIDTH = {"null": 0, "boolean": 1, "float": 4, "double": 8}
VARINTS = ("int", "long", "enum")
SIZED = ("bytes", "string")
PRIMITIVES = {*PRIMITIVE_WIDTH, "int", "long", *SIZED}
RECORDS = ("record", "error")
NAMED = (*RECORDS, "enum", "fixed")
COMPLEX = {*NAMED, "array", "map"}


class OutOfBounds(BadRecord):
    """A writer schema or a value beyond the bounds of decoding; the message says which."""

    def __init__(self, reason: str) -> None:
        super().__init__("decode", reason)


class Truncated(OutOfBounds):
    """Bytes that end inside a value: fastavro's EOFError, found before fastavro reads."""

    def __init__(self) -> None:
        super().__init__("the bytes end inside a value")


def is_decimal(body: Any) -> bool:
    """Whether a type is a decimal (in bytes or fixed)."""
    return isinstance(body, dict) and body.get("logicalType") == "decimal"


class Vetting:
    """One writer schema, vetted: `vet` refuses it or says whether its values need a walk; the
    walk asks it what each type is (`resolve`, `width`, `nothing`, `constant`)."""

    def __init__(self, named: Mapping[str, Any], label: str) -> None:
        self.named = named
        self.label = label
        self.defs: dict[str, Any] = {}  # named types the schema reaches, by full name
        self.path: set[str] = set()
        self.arrays: list[Any] = []  # item types of every array
        self.recursive = False
        self.blocks = False  # an array, a map or a decimal in bytes: a walk bounds them
        self.widths: dict[str, float] = {}  # least bytes a value of each named type takes
        self.memo: dict[tuple[str, str], Any] = {}  # (property, name) -> value

    def refused(self, why: str) -> OutOfBounds:
        return OutOfBounds(f"{self.label} refused: {why}")

    def vet(self, schema: Any) -> bool:
        """Whether values of `schema` need a walk before fastavro reads them; OutOfBounds
        with the reason when the schema is refused."""
        self._collect(schema)
        self._least_widths()
        for name, width in self.widths.items():
            if width == math.inf:
                raise self.refused(
                    f"record {name} contains itself with no union, array or map between, "
                    "so no value of it is finite"
                )
        for items in self.arrays:
            if self.width(items) == 0:
                raise self.refused(
                    f"its array items ({_describe(items)}) take no bytes, so a block count "
                    "could claim any number of them"
                )
        depth = self._depth(schema)
        if depth > MAX_DEPTH:
            raise self.refused(f"its types nest {depth} deep, more than {MAX_DEPTH}")
        return self.recursive or self.blocks or self._work(schema) > MAX_VALUES

    # -- what a type is ------------------------------------------------------------------

    def resolve(self, node: Any) -> tuple[str, Any, str | None]:
        """(kind, definition, full name of a named type or None) of a parsed type."""
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node, node, None
            found = self.named.get(node)
            if not isinstance(found, dict):
                raise self.refused(f"it names type {node!r}, which it does not define")
            return self.resolve(found)
        if isinstance(node, list):
            return "union", node, None
        if isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and (kind in PRIMITIVES or kind in COMPLEX):
                return kind, node, node.get("name") if kind in NAMED else None
            if isinstance(kind, (str, dict, list)):  # a type written as {"type": <type>}
                return self.resolve(kind)
        raise self.refused(f"{_describe(node)} is not an Avro type")

    def _collect(self, node: Any) -> None:
        """Named types, recursion and arrays of the schema (a depth-first walk)."""
        kind, body, name = self.resolve(node)
        if name is not None:
            if name in self.path:
                self.recursive = True
                return
            if name in self.defs:
                return
            self.defs[name] = body
            self.path.add(name)
        if kind in RECORDS:
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
        elif kind == "fixed" and is_decimal(body) and body["size"] > MAX_DECIMAL_BYTES:
            raise self.refused(
                f"decimal {name} is {body['size']} bytes, more than {MAX_DECIMAL_BYTES}"
            )
        elif kind == "bytes" and is_decimal(body):
            self.blocks = True
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

    def width(self, node: Any) -> float:
        kind, body, name = self.resolve(node)
        return self.widths[name] if name is not None else self._width_of(body)

    def _width_of(self, node: Any) -> float:
        kind, body, _ = self.resolve(node)
        if kind in PRIMITIVE_WIDTH:
            return PRIMITIVE_WIDTH[kind]
        if kind == "fixed":
            return body["size"]
        if kind in RECORDS:
            return sum(self.width(f["type"]) for f in body["fields"])
        if kind == "union":
            return 1 + min((self.width(b) for b in body), default=math.inf)
        return 1  # a varint, a length, or an array's or map's closing zero

    def _named(self, prop: str, node: Any, compute: Callable[[str, Any], Any]) -> Any:
        """`compute(kind, body)` of a type, remembered per named type (a schema may use one
        named type many times: computing it once keeps vetting linear in the schema)."""
        kind, body, name = self.resolve(node)
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
            if kind in RECORDS:
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
            if kind in RECORDS:
                total = 1 + sum(self._work(f["type"]) for f in body["fields"])
            elif kind == "union":
                total = 1 + max((self._work(b) for b in body), default=0)
            else:
                total = 1
            return min(total, MAX_VALUES + 1)

        return self._named("work", node, compute)

    def nothing(self, node: Any) -> int:
        """Values in a type that takes no bytes (its records, nulls and empty fixed)."""

        def compute(kind: str, body: Any) -> int:
            if kind in RECORDS:
                return min(1 + sum(self.nothing(f["type"]) for f in body["fields"]), 2**62)
            return 1

        return self._named("nothing", node, compute)

    def constant(self, node: Any) -> int | None:
        """The width of a type whose every value takes the same bytes, else None."""

        def compute(kind: str, body: Any) -> int | None:
            if kind in PRIMITIVE_WIDTH:
                return PRIMITIVE_WIDTH[kind]
            if kind == "fixed":
                return body["size"]
            if kind in RECORDS:
                widths = [self.constant(f["type"]) for f in body["fields"]]
                return None if None in widths else sum(w for w in widths if w is not None)
            return None

        return self._named("constant", node, compute)


def _describe(node: Any) -> str:
    text = json.dumps(node, default=str) if not isinstance(node, str) else node
    return text if len(text) <= 80 else text[:77] + "..."
