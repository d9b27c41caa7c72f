"""The ACLs each part of a pipeline needs, and `logwheel acls` to print or create them.

Least privilege, per part (issue 23): a computation's principal gets exactly its own
resources, all under `<pipeline>.<computation>.` (changelog, timer journal, watermark channel,
repartition topics, dead letters, transactional ids, its reader group) and its consumer group
`<pipeline>.<computation>`; READ on its inputs, tables and the watermark channels of what
writes them; WRITE on its outputs. It cannot read, write or create another computation's
topics, so a compromised or buggy job cannot forge another's state, timers or marks. An
injector's principal may WRITE only its streams and its own watermark channel. DELETE (which
`logwheel reset --wipe-state` needs) is granted only with `allow_reset`. A stream is never
named inside an internal prefix, nor written when it is named like any pipeline's internal
topic (`Pipeline` refuses both; the grants refuse the latter again, should a declaration have
been changed after it was checked), so no literal grant reaches one.
tests/integration/test_security.py runs a job whose computations each have only these ACLs.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.declarations import internal_topic
from framework.core.pipeline import InjectorWatermark, Pipeline, PipelineError
from framework.core.watermarks import partition_watermark
from framework.kafka.config import reader_group

OWN_TOPIC_OPERATIONS = ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")
"""Its own topics: `run` creates them if missing, reads its limits from their configs."""
RESET_OPERATIONS = ("DELETE",)
"""`logwheel reset --wipe-state` deletes and recreates changelog, timers and watermarks."""
READ_OPERATIONS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
WRITE_OPERATIONS = ("WRITE", "DESCRIBE", "DESCRIBE_CONFIGS")


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


def computation_acls(
    pipeline: Pipeline, name: str, principal: str, *, host: str, allow_reset: bool = False
) -> list[Acl]:
    """What `principal` needs to run computation `name` of `pipeline` (with `allow_reset`,
    also to `logwheel reset --wipe-state` it), and nothing more."""
    spec = pipeline[name]
    prefix = f"{spec.group}."
    operations = OWN_TOPIC_OPERATIONS + (RESET_OPERATIONS if allow_reset else ())
    acls = {Acl("TOPIC", "PREFIXED", prefix, op, principal, host) for op in operations}
    for pattern, group in (("LITERAL", spec.group), ("PREFIXED", prefix)):  # + reader group
        acls |= {Acl("GROUP", pattern, group, op, principal, host) for op in ("READ", "DESCRIBE")}
    acls |= {
        Acl("TRANSACTIONAL_ID", "PREFIXED", prefix, op, principal, host)
        for op in ("WRITE", "DESCRIBE")
    }
    reads = {i.stream for i in spec.inputs} | set(spec.table_topics)
    for i in spec.inputs:
        reads |= set(partition_watermark(pipeline, i.stream, i.stream, 0)[1])
    acls |= _literal(reads - {spec.watermarks}, READ_OPERATIONS, principal, host)
    acls |= _literal(_writable(set(spec.outputs)), WRITE_OPERATIONS, principal, host)
    return sorted(acls)


def injector_acls(pipeline: Pipeline, injector: str, principal: str, *, host: str) -> list[Acl]:
    """What `principal` needs to run injector `injector`: WRITE on the streams it writes and
    on its own watermark channel (which it may create), its transactional ids; nothing else."""
    streams = {
        s.stream
        for s in pipeline.sources.values()
        if isinstance(s.watermark, InjectorWatermark) and s.watermark.injector == injector
    }
    if not streams:
        raise PipelineError(
            f"pipeline {pipeline.name!r} has no injector {injector!r}: it has "
            f"{sorted(injectors(pipeline))}"
        )
    channel = f"{pipeline.name}.{injector}.watermarks"
    acls = _literal(_writable(streams) | {channel}, WRITE_OPERATIONS, principal, host)
    acls.add(Acl("TOPIC", "LITERAL", channel, "CREATE", principal, host))
    acls |= {
        Acl("TRANSACTIONAL_ID", "PREFIXED", f"{pipeline.name}.{injector}.injector-", op,
            principal, host)
        for op in ("WRITE", "DESCRIBE")
    }  # fmt: skip
    return sorted(acls)


def pipeline_acls(
    pipeline: Pipeline, principal: str, *, reset: bool = False, host: str = "127.0.0.1"
) -> list[Acl]:
    """One principal for the whole job: the union of every computation's and injector's
    ACLs, and the reader group `logwheel status` uses."""
    acls = {
        a
        for name in pipeline.computations
        for a in computation_acls(pipeline, name, principal, host=host, allow_reset=reset)
    }
    for injector in injectors(pipeline):
        acls |= set(injector_acls(pipeline, injector, principal, host=host))
    status = reader_group(pipeline.name)
    acls |= {Acl("GROUP", "LITERAL", status, op, principal, host) for op in ("READ", "DESCRIBE")}
    return sorted(acls)


def injectors(pipeline: Pipeline) -> list[str]:
    """The injectors that write the pipeline's sources."""
    return sorted(
        {
            s.watermark.injector
            for s in pipeline.sources.values()
            if isinstance(s.watermark, InjectorWatermark)
        }
    )


def _writable(topics: set[str]) -> set[str]:
    """`topics`, a part's outputs or streams, once none is named like an internal topic: Write
    is never granted literally on a changelog, timer journal, mark channel or dead letters (a
    part's own are granted by its prefix, an injector's channel by name)."""
    for topic in sorted(topics):
        internal = internal_topic(topic)
        if internal is not None:
            raise PipelineError(
                f"refusing to grant Write on {topic!r}, which is named like {internal}: "
                "rename that stream in the pipeline's declaration"
            )
    return topics


def _literal(topics: set[str], operations: tuple[str, ...], principal: str, host: str) -> set:
    return {Acl("TOPIC", "LITERAL", t, op, principal, host) for t in topics for op in operations}


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
