"""What an embedded broker asks of the machine beyond what every local JVM part does
(framework/jvm/process.py): Java checked for Kafka, cluster ids, probes of the cluster's
metadata, and its properties files."""

from __future__ import annotations

import base64
import logging
import uuid
from pathlib import Path

from framework.broker.security import write_private
from framework.errors import ConfigurationError
from framework.jvm import process

QUIET = logging.getLogger("logwheel.broker.librdkafka")
"""Where the broker's probing clients log: nowhere (a broker still starting refuses them)."""
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class BrokerError(ConfigurationError):
    """A problem the user must fix; the message is one line that names the fix."""


def find_java() -> str:
    """The java executable, checked to be Java 17 or newer."""
    try:
        return process.find_java("Kafka")
    except ConfigurationError as err:
        raise BrokerError(str(err)) from None


def cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes, URL-safe base64 without padding, not led by '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def metadata_answers(bootstrap: str, settings: dict[str, str]) -> bool:
    """Whether the broker serves metadata and has registered itself (it is unfenced)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**settings, "bootstrap.servers": bootstrap, "logger": QUIET})
    try:
        return bool(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return False


def write_properties(path: Path, settings: dict[str, str]) -> None:
    lines = [f"{k}={v}" for k, v in settings.items()]
    # 0600: a secure broker's file holds the key stores' and its own user's passwords
    write_private(path, "# written by logwheel at every start\n" + "\n".join(lines))
