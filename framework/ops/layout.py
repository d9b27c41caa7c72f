"""Where each node of a pipeline's graph goes in the dashboard's SVG: a layered drawing,
left to right (Sugiyama's scheme, reduced to what a pipeline needs). A node's column is the
longest path to it from a node nothing feeds (edges closing a cycle are ignored for that);
within a column nodes are ordered by the mean row of what feeds them, so edges cross little.
Computed here rather than in the browser so that the page stays a small script and the
placement is tested like any other function."""

from __future__ import annotations

from dataclasses import dataclass

from framework.ops.topology import Topology

CHAR_W = 7.2  # px per character of the 12 px monospace-ish labels the page uses
PAD_W, MIN_W = 28, 96
ROW_H, DETAIL_H = 40, 14
GAP_X, GAP_Y, MARGIN = 64, 22, 16


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float


def columns(graph: Topology) -> dict[str, int]:
    """Each node's column: the longest path to it, cycles broken where a search meets a node
    it is still inside."""
    successors: dict[str, list[str]] = {n: [] for n in graph.nodes}
    indegree = dict.fromkeys(graph.nodes, 0)
    for e in graph.edges:
        if e.source in successors and e.target in indegree:
            successors[e.source].append(e.target)
            indegree[e.target] += 1
    order: list[str] = []  # reverse post-order of a depth-first search: a topological order
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    back: set[tuple[str, str]] = set()
    roots = [n for n in graph.nodes if indegree[n] == 0] + list(graph.nodes)
    for root in roots:
        if root in state:
            continue
        stack = [(root, iter(successors[root]))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                state[node] = 2
                order.append(node)
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(successors[child])))
    column = dict.fromkeys(graph.nodes, 0)
    for node in reversed(order):
        for child in successors[node]:
            if (node, child) not in back:
                column[child] = max(column[child], column[node] + 1)
    return column


def layout(graph: Topology) -> tuple[dict[str, Box], float, float]:
    """Boxes for every node, and the drawing's width and height."""
    column = columns(graph)
    count = max(column.values(), default=-1) + 1
    members: list[list[str]] = [[] for _ in range(count)]
    for node in graph.nodes:  # declaration order first
        members[column[node]].append(node)
    feeders: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for e in graph.edges:
        if e.source in graph.nodes and e.target in feeders:
            feeders[e.target].append(e.source)
    rank: dict[str, float] = {}
    for col in members:
        for i, node in enumerate(col):
            placed = [rank[f] for f in feeders[node] if f in rank]
            rank[node] = sum(placed) / len(placed) if placed else float(i)
        col.sort(key=lambda n: rank[n])
        for i, node in enumerate(col):
            rank[node] = float(i)
    sizes = {n: _size(graph, n) for n in graph.nodes}
    heights = [sum(sizes[n][1] for n in col) + GAP_Y * max(0, len(col) - 1) for col in members]
    tallest = max(heights, default=0.0)
    boxes: dict[str, Box] = {}
    x = MARGIN
    for col, height in zip(members, heights, strict=True):
        width = max((sizes[n][0] for n in col), default=0.0)
        y = MARGIN + (tallest - height) / 2
        for node in col:
            w, h = sizes[node]
            boxes[node] = Box(round(x + (width - w) / 2, 1), round(y, 1), w, h)
            y += h + GAP_Y
        x += width + GAP_X
    # right: no gap after the last column (none at all without one); below: room for the
    # line of figures the page writes under a computation
    right = x - (GAP_X if members else 0) + MARGIN
    return boxes, round(right, 1), round(tallest + 2 * MARGIN + DETAIL_H, 1)


def _size(graph: Topology, node_id: str) -> tuple[float, float]:
    node = graph.nodes[node_id]
    chars = max(len(node.label), len(node.detail))
    w = max(MIN_W, round(chars * CHAR_W + PAD_W, 1))
    return w, float(ROW_H + (DETAIL_H if node.detail else 0))
