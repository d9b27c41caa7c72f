"""Moves what a process counted in plain integers into its Prometheus metrics, once a second,
so the per-record path pays nothing for them (framework/core/metrics.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

from framework.core.api import MIN_TIME
from framework.core.clock import now_ms
from framework.core.metrics import (
    ABORTS,
    COMMITS,
    CONSUMER_LAG,
    INPUT_WATERMARK,
    LATE_RECORDS,
    OUTPUT_WATERMARK,
    PERCENTILE_LATE_RECORDS,
    PERCENTILE_WATERMARK,
    RECORDS_IN,
    RECORDS_OUT,
    RESTORE_SECONDS,
    RESTORED_RECORDS,
    WATERMARK_LAG,
)
from framework.kafka.collector import Collector
from framework.streaming.input_partition import InputPartition
from framework.streaming.task import KeyedTask, Task


class Meter:
    """Reports one computation's counts, lags and watermarks."""

    def __init__(self, computation: str, consumer: Consumer, collector: Collector) -> None:
        self.computation = computation
        self.consumer = consumer
        self.collector = collector
        self.reported = time.monotonic()
        self._read: dict[int, int] = {}  # id(InputPartition) -> records already counted
        self._delivered: dict[str, int] = {}
        counters = (COMMITS, ABORTS, LATE_RECORDS, PERCENTILE_LATE_RECORDS, RESTORED_RECORDS)
        for counter in (*counters, RESTORE_SECONDS):
            counter.labels(computation)  # shown as 0 from the start, not only once it moves

    def report(self, tasks: Iterable[Task], inputs: Iterable[InputPartition]) -> None:
        name = self.computation
        for inp in inputs:
            before = self._read.get(id(inp), 0)
            if inp.read > before:
                RECORDS_IN.labels(name, inp.stream).inc(inp.read - before)
                self._read[id(inp)] = inp.read
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(inp.topic, inp.partition), cached=True
            )
            if high is not None and high >= 0:
                CONSUMER_LAG.labels(name, inp.topic, str(inp.partition)).set(
                    max(0, high - inp.position)
                )
        for topic, count in list(self.collector.delivered.items()):
            before = self._delivered.get(topic, 0)
            if count > before:
                RECORDS_OUT.labels(name, topic).inc(count - before)
                self._delivered[topic] = count
        now = now_ms()
        for task in tasks:
            if not isinstance(task, KeyedTask):
                continue
            p = str(task.partition)
            executor = task.executor
            if executor.strict_watermark > MIN_TIME:
                INPUT_WATERMARK.labels(name, p).set(executor.strict_watermark)
            if task.percentile is not None and executor.input_watermark > MIN_TIME:
                PERCENTILE_WATERMARK.labels(name, p).set(executor.input_watermark)
            output = executor.output_watermark()
            if output > MIN_TIME:
                OUTPUT_WATERMARK.labels(name, p).set(output)
                WATERMARK_LAG.labels(name, p).set(max(0, now - output) / 1000)
        self.reported = time.monotonic()
