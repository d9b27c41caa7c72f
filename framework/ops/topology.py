"""A pipeline's graph as nodes and edges, built from its declarations: what `logwheel graph`
prints as Graphviz dot and `logwheel ui` draws as SVG (framework/ops/layout.py places it).

Node kinds: "source" (a stream written from outside), "stream" (written by the pipeline),
"table" (a compacted topic read as a table), and each drawn part as its kind ("computation",
"window", "join", "sink", and whatever kind a part says it is: nothing is added here for a new
one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from framework.core.part import own_topic
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


def topology(pipeline: Pipeline) -> Topology:
    """Every stream, table and drawn part of `pipeline`, and what reads what."""
    graph = Topology(pipeline.name)
    for stream in pipeline.streams():
        kind = "source" if stream in pipeline.sources else "stream"
        graph.add(Node(stream_id(stream), kind, stream))
    streams = set(pipeline.streams())
    parts = [part for part in pipeline.parts() if part.node is not None]
    changelogs = {own_topic(part, "changelog"): part.node for part in parts}
    for part in parts:
        me = part.node
        graph.add(Node(me, part.kind, part.name, part.detail))
        for i in part.inputs:
            graph.edges.append(Edge(stream_id(i.stream), me, _key_label(i.key)))
        for out in part.outputs:
            graph.edges.append(Edge(me, stream_id(out)))
        for name, topic, what in part.tables_read():
            if topic in streams:
                graph.edges.append(Edge(stream_id(topic), me, name, "table"))
                continue
            graph.add(Node(f"t:{topic}", "table", topic, f"{what} {name}"))
            graph.edges.append(Edge(f"t:{topic}", me, "", "table"))
            if topic in changelogs:  # another part's state, read as a table
                graph.edges.append(Edge(changelogs[topic], f"t:{topic}"))
    return graph


def _key_label(key: object) -> str:
    if key is None:
        return ""
    return getattr(key, "field", "by key")


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
