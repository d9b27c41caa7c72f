"""Joins between streams: `pipeline.join(...)`, an interval join of two keyed streams (inner,
left or outer) driven by the input low watermark.

    pipeline.join("paid-orders", left="orders", right="payments",
                  inputs={"orders": key_by("order_id"), "payments": key_by("order_id")},
                  before_ms=0, after_ms=3_600_000, how="left", output="paid-orders")

A join is a `Computation` like any other (`operator.py`), declared by `declaration.py`; nothing
here knows of Kafka.
"""

from framework.core.joins.operator import HOWS, Joined

__all__ = ["HOWS", "Joined"]
