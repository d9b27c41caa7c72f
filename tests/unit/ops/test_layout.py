"""Where the dashboard draws each node of a pipeline's graph: a node's column is the longest
path to it (an edge closing a cycle left out), a column's nodes are ordered by the mean row of
what feeds them, a box is as wide as its longest line of text, columns are centred on one
another, and the drawing's size holds every box within its margins. (Real pipelines' graphs,
boxes not overlapping: tests/unit/ops/test_topology.py.)"""

from __future__ import annotations

from framework.ops.layout import (
    CHAR_W,
    DETAIL_H,
    GAP_X,
    GAP_Y,
    MARGIN,
    MIN_W,
    PAD_W,
    ROW_H,
    Box,
    columns,
    layout,
)
from framework.ops.topology import Edge, Node, Topology


def graph(nodes: str | list[Node], edges: str = "") -> Topology:
    """Nodes named by letters (or given), edges as "ab bc" (a feeds b, b feeds c)."""
    if isinstance(nodes, str):
        nodes = [Node(n, "computation", n) for n in nodes]
    return Topology("p", {n.id: n for n in nodes}, [Edge(e[0], e[1]) for e in edges.split()])


def test_a_nodes_column_is_its_longest_path_from_a_node_nothing_feeds():
    assert columns(graph("dabc", "ab bc ac dc")) == {"a": 0, "b": 1, "c": 2, "d": 0}


def test_a_node_declared_before_its_feeders_still_comes_after_them():
    assert columns(graph("cba", "ab bc")) == {"a": 0, "b": 1, "c": 2}


def test_the_edge_closing_a_cycle_is_left_out():
    assert columns(graph("abc", "ab bc ca")) == {"a": 0, "b": 1, "c": 2}
    assert columns(graph("ab", "aa ab")) == {"a": 0, "b": 1}


def test_a_cycle_fed_from_outside_is_entered_where_it_is_fed():
    assert columns(graph("cab", "ab bc cb")) == {"a": 0, "b": 1, "c": 2}


def test_a_cycle_that_nothing_outside_feeds_starts_at_its_first_declared_node():
    assert columns(graph("bca", "ab bc ca")) == {"b": 0, "c": 1, "a": 2}


def test_an_edge_to_or_from_no_node_of_the_graph_is_left_out():
    assert columns(graph("ab", "ab xb ay")) == {"a": 0, "b": 1}
    assert set(layout(graph("ab", "ab xb ay"))[0]) == {"a", "b"}


def test_a_columns_nodes_are_ordered_by_the_rows_of_what_feeds_them():
    # x above y; p (declared first) is fed by y, q by x: q goes above p, so no edges cross
    boxes, _, _ = layout(graph("xypq", "yp xq"))
    assert boxes["x"].y < boxes["y"].y
    assert boxes["q"].y < boxes["p"].y


def test_a_node_fed_by_several_sits_at_their_mean_row():
    # column 1: s fed by rows 0 and 2 (mean 1), t by row 0, u by row 2 — so t, s, u
    boxes, _, _ = layout(graph("abcstu", "as cs at cu"))
    assert boxes["t"].y < boxes["s"].y < boxes["u"].y


def test_what_feeds_a_node_counts_by_the_row_it_was_placed_in():
    # column 1: p (fed by row 0) and q (fed by row 3) are placed in rows 0 and 1; so in
    # column 2, x (fed by q: row 1) goes above y (fed by rows 0 and 3: mean 1.5)
    boxes, _, _ = layout(graph("abcdpqyx", "ap dq qx py dy"))
    assert boxes["x"].y < boxes["y"].y


def test_one_node_is_drawn_in_its_margins_at_the_smallest_size():
    boxes, width, height = layout(graph("a"))
    assert boxes == {"a": Box(MARGIN, MARGIN, MIN_W, ROW_H)}
    assert (width, height) == (MARGIN + MIN_W + MARGIN, MARGIN + ROW_H + MARGIN + DETAIL_H)


def test_a_box_is_as_wide_as_its_longer_line_and_a_detail_adds_a_line():
    label, detail = "l" * 20, "d" * 30
    boxes, _, _ = layout(graph([Node("a", "window", label, detail), Node("b", "source", label)]))
    assert boxes["a"].w == round(30 * CHAR_W + PAD_W, 1)
    assert boxes["b"].w == round(20 * CHAR_W + PAD_W, 1)
    assert (boxes["a"].h, boxes["b"].h) == (ROW_H + DETAIL_H, ROW_H)


def test_columns_are_centred_on_one_another():
    wide = Node("w", "computation", "w" * 30)
    nodes = [Node("a", "source", "a"), Node("b", "source", "b"), wide, Node("n", "stream", "n")]
    boxes, width, height = layout(graph(nodes, "aw bw wn"))
    column_1 = boxes["w"]
    assert boxes["a"].x == boxes["b"].x == MARGIN
    assert column_1.x == MARGIN + MIN_W + GAP_X
    assert boxes["n"].x == column_1.x + column_1.w + GAP_X
    tallest = 2 * ROW_H + GAP_Y  # column 0: a and b
    assert column_1.y == boxes["n"].y == MARGIN + (tallest - ROW_H) / 2
    assert width == boxes["n"].x + MIN_W + MARGIN
    assert height == MARGIN + tallest + MARGIN + DETAIL_H


def test_a_narrow_box_is_centred_in_its_columns_width():
    nodes = [Node("a", "source", "a" * 30), Node("b", "source", "b")]
    boxes, _, _ = layout(graph(nodes))
    assert boxes["b"].x == round(MARGIN + (boxes["a"].w - MIN_W) / 2, 1)


def test_a_graph_of_nothing_is_its_margins_never_a_negative_width():
    """The page sets the SVG's width and viewBox from it: a negative one is an error there."""
    assert layout(graph("")) == ({}, 2 * MARGIN, 2 * MARGIN + DETAIL_H)
