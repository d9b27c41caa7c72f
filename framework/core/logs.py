"""Logging for the `logwheel` command line: one setup, plain or JSON lines.

A person at a terminal reads plain lines; an orchestrator's log collector (Loki, Fluent Bit,
CloudWatch) wants one JSON object per line with the time, level, logger, message and any
fields the call passed in `extra=`. `setup()` is the only place that configures the root
logger; `LOGWHEEL_LOG_FORMAT` picks the format when `--log-format` is not given, else plain
(the job image sets `LOGWHEEL_LOG_FORMAT=json`).

`RateLimited` is for events that can come by the thousand (dead letters, undecodable
records): one line per reason per interval, carrying how many were folded into it.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from framework.errors import ConfigurationError

FORMATS = ("plain", "json")
PLAIN = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"

# The attributes every LogRecord has: anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, process, the
    `extra=` fields, and the exception text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def resolve_format(given: str | None) -> str:
    """`given`, else `LOGWHEEL_LOG_FORMAT`, else plain. An unknown name fails in one line
    naming the choices."""
    chosen = given or os.environ.get("LOGWHEEL_LOG_FORMAT") or "plain"
    if chosen not in FORMATS:
        raise ConfigurationError(
            f"log format {chosen!r} is unknown: use --log-format (or LOGWHEEL_LOG_FORMAT) "
            f"{' or '.join(FORMATS)}"
        )
    return chosen


def setup(
    log_format: str | None = None, level: int = logging.INFO, stream: TextIO | None = None
) -> str:
    """Configures the root logger once for the process (replacing any handler); returns the
    format used."""
    chosen = resolve_format(log_format)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if chosen == "json" else logging.Formatter(PLAIN))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # The registry client's HTTP library logs every request's URL at INFO: noise per schema
    # lookup, and a URL may carry user info (a password) — its warnings are enough.
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    return chosen


class RateLimited:
    """Logs at most one line per key per `interval` seconds; the line says how many events of
    that key came since the last line (`count`, also a JSON field). Thread-safe."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 60.0,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.level = level
        self.clock = clock
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}
        self._lock = threading.Lock()

    def log(self, key: str, message: str, *args: object, **fields: object) -> bool:
        """Counts one event of `key`; logs `message % args` with its count when the key's
        interval has passed. Returns whether a line was written."""
        with self._lock:
            count = self._count.get(key, 0) + 1
            now = self.clock()
            if now - self._last.get(key, -float("inf")) < self.interval:
                self._count[key] = count
                return False
            self._last[key] = now
            self._count[key] = 0
        suffix = "" if count == 1 else f" ({count} since the last report)"
        self.logger.log(
            self.level, message + suffix, *args, extra={"key": key, "count": count, **fields}
        )
        return True
