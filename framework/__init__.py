"""logwheel: MillWheel's programming model on Kafka — per-key state, timers, low watermarks and
exactly-once delivery for Python computations."""

from framework.core import windows
from framework.core.api import MIN_TIME, Computation, Context, Record, Timer
from framework.core.pipeline import (
    BoundedOutOfOrderness,
    Dedup,
    GlobalTable,
    InjectorWatermark,
    Percentile,
    Pipeline,
    PipelineError,
    key_by,
)

__all__ = [
    "MIN_TIME",
    "BoundedOutOfOrderness",
    "Computation",
    "Context",
    "Dedup",
    "GlobalTable",
    "InjectorWatermark",
    "Percentile",
    "Pipeline",
    "PipelineError",
    "Record",
    "Timer",
    "key_by",
    "windows",
]
