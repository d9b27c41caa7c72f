"""The ACLs each part of a pipeline needs, and `logwheel acls` to print or create them.

Least privilege, per part: each part says what its principal needs (`Part.grants`,
framework/core/part.py) and nothing more. A computation gets exactly its own resources, all
under `<pipeline>.<computation>.` (changelog, timer journal, watermark channel, repartition
topics, dead letters, replays, transactional ids, its reader group) and its consumer group
`<pipeline>.<computation>`; Read on its inputs, tables and the watermark channels of what
writes them; Write on its outputs. A sink gets its group, Read on its inputs and Write on its
dead-letter topic. An injector may Write only its streams and its own watermark channel. The
queries of the pipeline's state (`StateClient`, `logwheel state get`) may describe the
computations' groups and read where their instances answer. None can read, write or create
another part's topics, so a compromised or buggy one cannot forge another's state, timers or
marks. DELETE (which `logwheel reset --wipe-state` needs) is granted only with `allow_reset`.
A stream is never named inside an internal prefix, nor written when it is named like any
pipeline's internal topic (`Pipeline` refuses both; the grants refuse the latter again, should a
declaration have been changed after it was checked), so no literal grant reaches one.
tests/integration/test_security.py runs parts that each have only these ACLs.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.declarations import internal_topic
from framework.core.part import reader_group
from framework.core.pipeline import Pipeline, PipelineError


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW rule: `principal` may do `operation` on `resource` named `name` (a prefix when
    `pattern` is PREFIXED)."""

    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID
    pattern: str  # PREFIXED or LITERAL
    name: str
    operation: str
    principal: str
    host: str = "127.0.0.1"

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


def part_acls(
    pipeline: Pipeline, name: str, principal: str, *, host: str, allow_reset: bool = False
) -> list[Acl]:
    """What `principal` needs to run part `name` of `pipeline` (with `allow_reset`, also to
    `logwheel reset --wipe-state` it), and nothing more."""
    part = pipeline.part(name)
    grants = part.grants(pipeline, reset=allow_reset)
    own = {t.name for t in part.own_topics()}
    written = {
        g.name
        for g in grants
        if g.resource == "TOPIC" and g.pattern == "LITERAL" and "WRITE" in g.operations
    }
    _writable(written - own)
    return sorted(
        Acl(g.resource, g.pattern, g.name, op, principal, host)
        for g in grants
        for op in g.operations
    )


def pipeline_acls(
    pipeline: Pipeline, principal: str, *, reset: bool = False, host: str = "127.0.0.1"
) -> list[Acl]:
    """One principal for the whole job: the union of every part's ACLs, and the reader group
    `logwheel status` uses."""
    acls = {
        a
        for part in pipeline.parts()
        for a in part_acls(pipeline, part.name, principal, host=host, allow_reset=reset)
    }
    status = reader_group(pipeline.name)
    acls |= {Acl("GROUP", "LITERAL", status, op, principal, host) for op in ("READ", "DESCRIBE")}
    return sorted(acls)


def _writable(topics: set[str]) -> None:
    """Refuse Write on any of `topics` (what a part writes besides its own topics) named like
    an internal topic: Write is never granted literally on another's changelog, timer journal,
    mark channel or dead letters."""
    for topic in sorted(topics):
        internal = internal_topic(topic)
        if internal is not None:
            raise PipelineError(
                f"refusing to grant Write on {topic!r}, which is named like {internal}: "
                "rename that stream in the pipeline's declaration"
            )


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
