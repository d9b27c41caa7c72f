"""The ACLs a pipeline's job needs, and `logwheel acls` to print or create them.

Everything a pipeline owns is named under `<pipeline>.`: its internal topics (changelogs,
timer journals, watermark channels, repartition topics, dead letters), its consumer groups
(`<pipeline>.<computation>`) and its transactional ids (`<pipeline>.<computation>.<instance>`,
`<pipeline>.<injector>.injector-<n>`). So three prefixed ACLs grant a job exactly its own
resources; only the streams, which are named globally, need literal ones: read for what it
reads, write for what it writes. tests/integration/test_security.py runs a job with exactly
these ACLs and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.pipeline import Pipeline

PREFIXED_TOPIC_OPERATIONS = ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")
"""Its own topics: `run` creates them if missing, reads its limits from their configs."""
RESET_OPERATIONS = ("DELETE",)
"""`logwheel reset --wipe-state` deletes and recreates changelog, timers and watermarks."""


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW rule: `principal` may do `operation` on `resource` named `name` (a prefix when
    `pattern` is PREFIXED)."""

    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID
    pattern: str  # PREFIXED or LITERAL
    name: str
    operation: str
    principal: str
    host: str = "*"

    def __str__(self) -> str:
        return (
            f"ALLOW {self.principal} {self.operation} on {self.resource} "
            f"{self.pattern.lower()} {self.name!r} from {self.host}"
        )

    def binding(self):
        """The confluent-kafka `AclBinding` of this rule."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        return AclBinding(
            ResourceType[self.resource],
            self.name,
            ResourcePatternType[self.pattern],
            self.principal,
            self.host,
            AclOperation[self.operation],
            AclPermissionType.ALLOW,
        )


def pipeline_acls(
    pipeline: Pipeline, principal: str, *, reset: bool = False, host: str = "*"
) -> list[Acl]:
    """What `principal` needs to run every computation of `pipeline` (and `logwheel topics`
    for its own topics, `logwheel status`; `logwheel reset` too with `reset`)."""
    prefix = f"{pipeline.name}."
    operations = PREFIXED_TOPIC_OPERATIONS + (RESET_OPERATIONS if reset else ())
    acls = {Acl("TOPIC", "PREFIXED", prefix, op, principal, host) for op in operations}
    acls |= {Acl("GROUP", "PREFIXED", prefix, op, principal, host) for op in ("READ", "DESCRIBE")}
    acls |= {
        Acl("TRANSACTIONAL_ID", "PREFIXED", prefix, op, principal, host)
        for op in ("WRITE", "DESCRIBE")
    }
    reads, writes = set(), set()
    for spec in pipeline.computations.values():
        reads |= {i.stream for i in spec.inputs} | set(spec.tables.values())
        writes |= set(spec.outputs)
    for stream, ops in [(s, ("READ",)) for s in reads] + [(s, ("WRITE",)) for s in writes]:
        for op in (*ops, "DESCRIBE", "DESCRIBE_CONFIGS"):
            acls.add(Acl("TOPIC", "LITERAL", stream, op, principal, host))
    return sorted(acls)


def create_acls(acls: list[Acl], bootstrap: str, kafka: dict | None = None) -> None:
    """Create the rules (as an administrator: a super user, or one allowed to Alter the
    cluster); existing rules are left as they are."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from framework.errors import ConfigurationError
    from framework.kafka.config import client_config

    admin = AdminClient(client_config(bootstrap, kafka))
    for binding, future in admin.create_acls([a.binding() for a in acls]).items():
        try:
            future.result(60)
        except KafkaException as error:
            raise ConfigurationError(
                f"cannot create the ACL {binding}: {error.args[0].str()}: connect as an "
                "administrator (--config with a super user's settings)"
            ) from None
