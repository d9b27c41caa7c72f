"""Windows and aggregations: `pipeline.windowed(...)`'s window shapes and aggregators.

    from framework import windows
    pipeline.windowed("clicks-per-minute", inputs={"clicks": key_by("user")},
                      window=windows.Tumbling(size_ms=60_000), aggregate=windows.Count(),
                      output="clicks-per-minute")

A windowed computation is a `Computation` like any other (`operator.py`), built on per-key
state, event-time timers and the input low watermark; nothing here knows of Kafka.
"""

from framework.core.windows.aggregates import (
    Aggregate,
    Collect,
    Count,
    Max,
    Mean,
    Min,
    Reduce,
    Sum,
)
from framework.core.windows.shapes import Hopping, Session, Tumbling, Window

__all__ = [
    "Aggregate",
    "Collect",
    "Count",
    "Hopping",
    "Max",
    "Mean",
    "Min",
    "Reduce",
    "Session",
    "Sum",
    "Tumbling",
    "Window",
]
