from framework.ops.status import graph
from jobs.zeitgeist import pipeline


def test_graph_names_every_stream_computation_and_edge():
    dot = graph(pipeline)
    assert dot.startswith('digraph "zeitgeist" {') and dot.endswith("}")
    assert '"s:queries" -> "c:window-counter" [label="by key"];' in dot
    assert '"c:dip-detector" -> "s:anomalies";' in dot
    assert dot.count("shape=box") == len(pipeline.computations)
