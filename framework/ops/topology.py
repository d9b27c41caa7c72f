"""A pipeline's graph as nodes and edges, built from its declarations: what `logwheel graph`
prints as Graphviz dot and `logwheel ui` draws as SVG (framework/ops/layout.py places it).

Node kinds: "source" (a stream written from outside), "stream" (written by the pipeline),
"table" (a compacted topic read as a table), "computation", "window" and any other
`ComputationSpec.kind` (a join declared as a computation shows as its kind with nothing
added here), and "sink" (anything in `pipeline.sinks` with `inputs`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from framework.core.pipeline import Pipeline


@dataclass(frozen=True)
class Node:
    id: str  # "s:<stream>", "c:<computation>", "t:<topic>", "k:<sink>"
    kind: str
    label: str
    detail: str = ""  # one line under the label: a window's policy, a table's name, ...


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str = ""  # the key extractor of an input that re-keys
    kind: str = "data"  # "data", or "table": read as a table, not consumed


@dataclass
class Topology:
    name: str
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def add(self, node: Node) -> None:
        self.nodes.setdefault(node.id, node)


def stream_id(stream: str) -> str:
    return f"s:{stream}"


def computation_id(name: str) -> str:
    return f"c:{name}"


def sink_id(name: str) -> str:
    return f"k:{name}"


def topology(pipeline: Pipeline) -> Topology:
    """Every stream, computation, table and sink of `pipeline`, and what reads what."""
    graph = Topology(pipeline.name)
    for stream in pipeline.streams():
        kind = "source" if stream in pipeline.sources else "stream"
        graph.add(Node(stream_id(stream), kind, stream))
    streams = set(pipeline.streams())
    changelogs = {spec.changelog: spec.name for spec in pipeline.computations.values()}
    for spec in pipeline.computations.values():
        me = computation_id(spec.name)
        graph.add(Node(me, spec.kind, spec.name, _detail(spec)))
        for i in spec.inputs:
            graph.edges.append(Edge(stream_id(i.stream), me, _key_label(i.key)))
        for out in spec.outputs:
            graph.edges.append(Edge(me, stream_id(out)))
        for name, topic, what in tables_of(spec):
            if topic in streams:
                graph.edges.append(Edge(stream_id(topic), me, name, "table"))
                continue
            graph.add(Node(f"t:{topic}", "table", topic, f"{what} {name}"))
            graph.edges.append(Edge(f"t:{topic}", me, "", "table"))
            if topic in changelogs:  # another computation's state, read as a table
                graph.edges.append(Edge(computation_id(changelogs[topic]), f"t:{topic}"))
    for name, sink in _sinks(pipeline):
        graph.add(Node(sink_id(name), "sink", name, type(getattr(sink, "sink", sink)).__name__))
        for stream in _input_streams(getattr(sink, "inputs", ())):
            graph.add(Node(stream_id(stream), "stream", stream))
            graph.edges.append(Edge(stream_id(stream), sink_id(name)))
    return graph


def tables_of(spec: object) -> list[tuple[str, str, str]]:
    """(name, topic, "table" or "global table") of each table a computation reads: its
    co-partitioned `tables`, and its `global_tables` where its version declares them (a topic,
    or a `GlobalTable` with one)."""
    found = [(name, topic, "table") for name, topic in getattr(spec, "tables", {}).items()]
    for name, table in (getattr(spec, "global_tables", None) or {}).items():
        found.append((name, getattr(table, "topic", table), "global table"))
    return found


def _sinks(pipeline: Pipeline) -> Iterable[tuple[str, object]]:
    """The pipeline's sinks (`pipeline.sink(...)`), where its version declares them."""
    sinks = getattr(pipeline, "sinks", None) or {}
    return sinks.items() if isinstance(sinks, Mapping) else ()


def _input_streams(inputs: object) -> list[str]:
    """Stream names of a declaration's inputs: `Input`s, or a mapping stream -> extractor."""
    if isinstance(inputs, Mapping):
        return list(inputs)
    return [getattr(i, "stream", i) for i in inputs]  # type: ignore[union-attr]


def _key_label(key: object) -> str:
    if key is None:
        return ""
    return getattr(key, "field", "by key")


def _detail(spec) -> str:
    if spec.kind == "window":
        return f"grace {spec.hold_ms} ms" if spec.hold_ms else ""
    return ""


def to_dot(graph: Topology) -> str:
    """Graphviz dot: streams are ellipses (sources doubled), computations boxes, tables
    cylinders, sinks folders; table reads dashed."""
    shapes = {"source": "doublecircle", "stream": "ellipse", "table": "cylinder", "sink": "folder"}
    lines = [f'digraph "{graph.name}" {{', "  rankdir=LR;"]
    for node in graph.nodes.values():
        shape = shapes.get(node.kind, "box")
        if node.kind == "source":
            shape = "ellipse, peripheries=2"
        lines.append(f'  "{node.id}" [label="{node.label}", shape={shape}];')
    for edge in graph.edges:
        attrs = []
        if edge.label:
            attrs.append(f'label="{edge.label}"')
        if edge.kind == "table":
            attrs.append("style=dashed")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f'  "{edge.source}" -> "{edge.target}"{suffix};')
    lines.append("}")
    return "\n".join(lines)
