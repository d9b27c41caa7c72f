"""Aggregators: what a window keeps of its records, as a JSON-compatible accumulator.

An aggregator is four small functions — `initial()`, `add(acc, record)`, `merge(a, b)` and
`result(acc)` — as Flink's AggregateFunction or Bytewax's fold. The accumulator lives in the
key's state (so in the changelog), hence JSON-compatible; `merge` combines two sessions that a
record bridged. A record an aggregator cannot take (a missing or non-numeric field, a full
`Collect`) raises `BadRecord` at stage "aggregate": it goes to the dead-letter topic with its
reason and the window stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from framework.core.api import Record
from framework.core.context import copy_json
from framework.errors import BadRecord, ConfigurationError

STAGE = "aggregate"


class Aggregate:
    """Base of aggregators; subclasses override what they need. The default counts nothing."""

    mergeable = True
    """Whether `merge` is defined; a session window needs it."""

    def initial(self) -> Any:
        return None

    def add(self, acc: Any, record: Record) -> Any:
        """The accumulator once `record` is in it (a new object or `acc` changed in place)."""
        return acc

    def fold(self, acc: Any, record: Record, table: Callable[[str], Any]) -> Any:
        """`add`, called by the windowed operator with `table` (`ctx.table`) at hand for an
        aggregator that reads the computation's tables (`Reduce(..., tables=True)`)."""
        return self.add(acc, record)

    def merge(self, a: Any, b: Any) -> Any:
        """One accumulator holding the records of `a`, then those of `b`."""
        raise NotImplementedError(f"{type(self).__name__} cannot merge")

    def result(self, acc: Any) -> Any:
        """The window's value, as produced."""
        return acc


class Count(Aggregate):
    """How many records the window holds."""

    def initial(self) -> int:
        return 0

    def add(self, acc: int, record: Record) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def __repr__(self) -> str:
        return "Count()"


class _Field(Aggregate):
    """An aggregator of one field of the records' values (the whole value when `field` is
    None)."""

    def __init__(self, field: str | None) -> None:
        self.field = field

    def value(self, record: Record) -> Any:
        if self.field is None:
            return record.value
        value = record.value
        if not isinstance(value, Mapping) or self.field not in value:
            raise BadRecord(STAGE, f"{self!r}: the record's value has no field {self.field!r}")
        return value[self.field]

    def number(self, record: Record) -> int | float:
        value = self.value(record)
        if type(value) not in (int, float):
            raise BadRecord(STAGE, f"{self!r}: {value!r} is not a number")
        return value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class Sum(_Field):
    """The sum of a numeric field."""

    def initial(self) -> int:
        return 0

    def add(self, acc: float, record: Record) -> float:
        return acc + self.number(record)

    def merge(self, a: float, b: float) -> float:
        return a + b


class Min(_Field):
    """The smallest value of a numeric field."""

    def add(self, acc: float | None, record: Record) -> float:
        value = self.number(record)
        return value if acc is None or value < acc else acc

    def merge(self, a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else min(a, b)


class Max(_Field):
    """The largest value of a numeric field."""

    def add(self, acc: float | None, record: Record) -> float:
        value = self.number(record)
        return value if acc is None or value > acc else acc

    def merge(self, a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else max(a, b)


class Mean(_Field):
    """The mean of a numeric field, kept as [sum, count]."""

    def initial(self) -> list:
        return [0, 0]

    def add(self, acc: list, record: Record) -> list:
        return [acc[0] + self.number(record), acc[1] + 1]

    def merge(self, a: list, b: list) -> list:
        return [a[0] + b[0], a[1] + b[1]]

    def result(self, acc: list) -> float | None:
        return acc[0] / acc[1] if acc[1] else None


class Collect(_Field):
    """The values of a field (the whole values when `field` is None), in arrival order, at
    most `limit` per window: a record beyond it is dead-lettered, not silently dropped."""

    def __init__(self, field: str | None = None, limit: int = 10_000) -> None:
        super().__init__(field)
        if type(limit) is not int or limit < 1:
            raise ConfigurationError(f"Collect(limit={limit!r}): use an int >= 1")
        self.limit = limit

    def initial(self) -> list:
        return []

    def add(self, acc: list, record: Record) -> list:
        value = self.value(record)
        return self.merge(acc, [value])

    def merge(self, a: list, b: list) -> list:
        if len(a) + len(b) > self.limit:
            raise BadRecord(
                STAGE,
                f"{self!r}: the window would hold {len(a) + len(b)} values, over its limit of "
                f"{self.limit}: raise Collect(limit=...) or aggregate instead of collecting",
            )
        a.extend(b)
        return a

    def __repr__(self) -> str:
        return f"Collect({self.field!r}, limit={self.limit})"


class Reduce(Aggregate):
    """A user's fold over the records' values: `add(acc, value) -> acc` from `initial` (a
    JSON-compatible value, copied for each window, or a function returning one); `merge(a, b)`
    combines two accumulators and is needed by session windows. With `tables=True`, `add`
    is called `add(acc, record, table)`: the whole record (its time, for lookups as of it)
    and `table(name)`, the view of a table (or global table) the computation declares."""

    def __init__(
        self,
        initial: Any,
        add: Callable[..., Any],
        merge: Callable[[Any, Any], Any] | None = None,
        *,
        tables: bool = False,
    ) -> None:
        self._initial = initial
        self._add = add
        self._merge = merge
        self._tables = tables
        self.mergeable = merge is not None

    def initial(self) -> Any:
        return self._initial() if callable(self._initial) else copy_json(self._initial)

    def add(self, acc: Any, record: Record) -> Any:
        return self._add(acc, record.value)

    def fold(self, acc: Any, record: Record, table: Callable[[str], Any]) -> Any:
        return self._add(acc, record, table) if self._tables else self._add(acc, record.value)

    def merge(self, a: Any, b: Any) -> Any:
        if self._merge is None:
            return super().merge(a, b)
        return self._merge(a, b)

    def __repr__(self) -> str:
        return f"Reduce({self._initial!r}, {self._add!r}, merge={self._merge!r})"
