"""Client configuration for every Kafka client logwheel makes, in one place.

Defaults are chosen for low latency on small batches and quick failover; anything in the user's
`[kafka]` config table passes through and wins. String values there may refer to environment
variables as `${VAR}` (`$${` is a literal `${`), so secrets stay out of files
(`expand_env`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from framework.errors import ConfigurationError

_REFERENCE = re.compile(r"\$(?:(\$)|\{([^}]*)\}|(\{))")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

TRANSACTION_TIMEOUT_MS = 10_000
"""Short, as in Kafka Streams under exactly-once: a transaction left open by a killed process
blocks read_committed readers until the broker aborts it after this long."""


def expand_env(
    settings: Mapping[str, Any], origin: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`settings` with every `${VAR}` in a string value replaced by that environment variable.

    A variable that is not set, or a malformed reference, fails in one line naming the
    setting and the variable (never the value: it may be a secret). `origin` says where the
    settings came from, for that line."""
    env = os.environ if environ is None else environ

    def expand(key: str, value: str) -> str:
        def substitute(match: re.Match) -> str:
            if match.group(1):
                return "$"
            name = match.group(2)
            if name is None or not _VAR.match(name):
                raise ConfigurationError(
                    f"{origin}: {key} has a malformed reference: write ${{NAME}} with a "
                    "variable name (letters, digits, _), or $${ for a literal ${"
                )
            if name not in env:
                raise ConfigurationError(
                    f"{origin}: {key} refers to ${{{name}}}, which is not set: export {name}"
                )
            return env[name]

        return _REFERENCE.sub(substitute, value)

    return {k: expand(k, v) if isinstance(v, str) else v for k, v in settings.items()}


def client_config(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    config.update(extra or {})
    return config


def producer_config(
    bootstrap: str,
    *,
    transactional_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Idempotent producer with Java's murmur2 partitioner (invariant 6)."""
    config = {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "linger.ms": 1,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 1_000_000,
        "compression.type": "lz4",
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
        config["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
        # A commit that follows the previous one closely sometimes meets CONCURRENT_TRANSACTIONS
        # while the broker still writes the markers, and waits out the retry backoff (growing
        # from it, up to retry.backoff.max.ms, should the refusals go on). At 10 ms, 2% of
        # light-input commits took over 5 ms offering their offsets, against 0.2-0.5% at 2 ms:
        # exactly-once end to end, 300 records/s, p95 26.0-29.6 ms at 10 against 14.3-23.2 at
        # 2 (p50 9.8-10.2 against 9.4-10.0; bench/latency.py --guarantee exactly_once,
        # alternated, four runs at 2 ms, two at 10); 1 ms was no better.
        config["retry.backoff.ms"] = 2
    config.update(extra or {})
    return config


def consumer_config(
    bootstrap: str,
    *,
    group: str | None = None,
    instance: str | None = None,
    assignor: str = "range",
    reader: str = "logwheel-unused",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """read_committed consumer that never commits by itself: commits belong to the committer.

    `instance` makes the member static (KIP-345): a restarted process takes its partitions
    back at once instead of waiting out its killed predecessor's session. Hence the eager
    `range` assignor, which also co-locates partition p of every keyed topic: under
    cooperative-sticky, a static member killed between the two rounds of an incremental
    rebalance is replaced by one handed the first round's assignment, and the partitions it
    was giving up stay owned by no member for good (tests/integration/test_membership.py).

    Without `group` the consumer only assigns partitions; librdkafka still wants a group id and
    looks up its coordinator, which an authorizer checks (Describe on the group): `reader` is
    that id, so a pipeline's readers pass one under the pipeline's prefix (`reader_group`),
    and those that read or move a group's committed offsets pass that group."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 20,
        "fetch.queue.backoff.ms": 10,
    }
    if group is None:
        config["group.id"] = reader
        config["enable.partition.eof"] = True
    else:
        config.update(
            {
                "group.id": group,
                "partition.assignment.strategy": assignor,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                "max.poll.interval.ms": 120_000,
            }
        )
        if instance is not None:
            config["group.instance.id"] = instance
    config.update(extra or {})
    return config


_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_settings(settings: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka client settings (`[kafka]`) as the Java client's, for Spark's Kafka source.

    The two clients agree on most names but not on credentials and trust: `sasl.username` and
    `sasl.password` become a `sasl.jaas.config` for the mechanism, `ssl.ca.location` (a PEM
    file) a PEM trust store. Everything else passes through as it is."""
    java = {k: str(v) for k, v in settings.items()}
    mechanism = java.pop("sasl.mechanisms", None) or java.get("sasl.mechanism")
    if mechanism:
        java["sasl.mechanism"] = mechanism
    username, password = java.pop("sasl.username", None), java.pop("sasl.password", None)
    if username is not None and "sasl.jaas.config" not in java:
        module = _JAAS_MODULES.get((mechanism or "").upper())
        if module is None:
            raise ConfigurationError(
                f"sasl.mechanism {mechanism!r}: Spark's Kafka client takes sasl.username and "
                f"sasl.password only with {', '.join(_JAAS_MODULES)}; give sasl.jaas.config"
            )
        quote = lambda text: text.replace("\\", "\\\\").replace('"', '\\"')  # noqa: E731
        java["sasl.jaas.config"] = (
            f'{module} required username="{quote(username)}" password="{quote(password or "")}";'
        )
    ca = java.pop("ssl.ca.location", None)
    if ca is not None and "ssl.truststore.location" not in java:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = ca
    if java.get("ssl.endpoint.identification.algorithm") == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    return java
