"""Who queries a pipeline's state (`framework.query.StateClient`, `logwheel state get`), as a
part of the pipeline for `logwheel acls`: it finds the instance that owns a key through each
queryable computation's group and the directory where its instances say they answer, and asks
that instance over HTTP. It runs no task and keeps no topic."""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.part import (
    GROUP_OPERATIONS,
    READ_OPERATIONS,
    Grant,
    Graph,
    Unrun,
    literal,
    reader_group,
    serving_topic,
)

QUERIES = "queries"
"""The name of this part (its principal's `{name}` in `logwheel acls`): kept, no computation,
sink or injector may take it."""


@dataclass(frozen=True)
class QueriesSpec(Unrun):
    """The queries of `pipeline`'s state: the groups of its queryable computations."""

    pipeline: str
    groups: tuple[str, ...]

    name = QUERIES
    kind = "queries"

    def grants(self, graph: Graph, *, reset: bool = False) -> list[Grant]:
        """Describe each group (who owns which partition), read its directory of where its
        instances answer, with a reader group of its own."""
        grants = literal({serving_topic(g) for g in self.groups}, READ_OPERATIONS)
        for group in self.groups:
            grants.append(Grant("GROUP", "LITERAL", group, ("DESCRIBE",)))
            grants.append(Grant("GROUP", "LITERAL", reader_group(group), GROUP_OPERATIONS))
        return sorted(grants)
