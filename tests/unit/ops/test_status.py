from rich.console import Console

from framework.ops.status import Status, graph, status_table
from jobs.zeitgeist import pipeline


def shown(rows: list[Status]) -> str:
    """The status table as a wide terminal prints it."""
    console = Console(width=400, record=True)
    console.print(status_table("p", rows))
    return console.export_text()


def test_graph_names_every_stream_computation_and_edge():
    dot = graph(pipeline)
    assert dot.startswith('digraph "zeitgeist" {') and dot.endswith("}")
    assert '"s:queries" -> "c:window-counter" [label="by key"];' in dot
    assert '"c:dip-detector" -> "s:anomalies";' in dot
    assert dot.count("shape=box") == len(pipeline.computations)


def test_the_table_shows_percentile_columns_only_when_a_computation_has_one():
    strict = Status("strict", "t", 0, 1_700_000_000_000, 1000, 0, None, "a")
    fast = Status("fast", "p.fast.t.by-key", 0, 1_700_000_000_000, 1000, 0, None, "a",
                  1_700_000_180_000, 42)  # fmt: skip
    assert "percentile" not in shown([strict])
    text = shown([strict, fast])
    assert "late by percentile" in text and "2023-11-14 22:16:20.000" in text and "42" in text


def test_the_table_names_the_producer_holding_a_watermark_back_only_when_one_does():
    even = Status("c", "p.c.t.by-key", 0, 1_700_000_000_000, 1000, 0, None, "a")
    held = Status("c", "p.c.t.by-key", 1, 1_700_000_000_000, 1000, 0, None, "a",
                  held_back_by="c/by-key/t/3")  # fmt: skip
    assert "held back by" not in shown([even])
    text = shown([even, held])
    assert "held back by" in text and "c/by-key/t/3" in text
