"""Zeitgeist, MillWheel's motivating pipeline: spikes and dips in search-query traffic.

    query-generator ─▶ queries ─▶ window-counter ─▶ window-counts ─▶ model ─▶ models
      (injector)                  (key: query)
    models ─┬▶ spike-detector ─┬▶ anomalies
            └▶ dip-detector  ──┘

Run it with `logwheel run jobs.zeitgeist:pipeline`, feed it with
`python -m jobs.zeitgeist.inject`, or see both with `make demo`.
"""

from framework import InjectorWatermark, Pipeline, windows
from jobs.zeitgeist.computations import (
    WINDOW_MS,
    DipDetector,
    ModelCalculator,
    SpikeDetector,
    query_key,
)

INJECTOR = "query-generator"

pipeline = Pipeline("zeitgeist")
pipeline.source("queries", schema="zeitgeist.SearchQuery", watermark=InjectorWatermark(INJECTOR))
pipeline.windowed(
    "window-counter",
    inputs={"queries": query_key},
    window=windows.Tumbling(size_ms=WINDOW_MS),
    aggregate=windows.Count(),
    output="window-counts",
    output_schema="zeitgeist.WindowResult",
    emit="final",
)
pipeline.computation(
    "model",
    ModelCalculator,  # counts the windows window-counts lacks as empty
    inputs={"window-counts": None},  # already keyed by query
    outputs={"models": "zeitgeist.Model"},
)
pipeline.computation(
    "spike-detector",
    SpikeDetector,
    inputs={"models": None},
    outputs={"anomalies": "zeitgeist.Anomaly"},
)
pipeline.computation(
    "dip-detector",
    DipDetector,
    inputs={"models": None},
    outputs={"anomalies": "zeitgeist.Anomaly"},
)
