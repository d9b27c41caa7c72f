"""`logwheel schemas check --registry URL`: the project's schemas against a Schema Registry's
latest versions, so a job is not deployed with a schema its topics' other readers or writers
cannot resolve.

Which subjects a schema file is checked against: every subject whose latest version is an
Avro record of the same full name (namespace and name). A topic's values live under
`<topic>-value` (TopicNameStrategy); matching by name instead of by the pipeline's streams
covers the topics the project reads and writes without a job to import, and the ones another
team registered first. Subjects of other types, or not Avro, are not the project's business.

Which rule: the subject's compatibility level, else the registry's global one (`compat.LEVELS`:
BACKWARD, the project's version reads the latest's values; FORWARD, readers on the latest
read the project's; FULL, both; the transitive levels against the latest only). NONE or no
level is logwheel's own rule, both ways, as between the versions of a schema file: a registry
that accepts anything does not make a topic's values readable. Each broken rule is one line
naming record, field and rule (serde/compat.py); where logwheel's rules find nothing but the
registry's own check under the subject's level refuses the schema, that refusal is the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.schema_registry import connect
from framework.serde.catalogue import Schemas
from framework.serde.compat import against, directions, full_name
from framework.serde.confluent import registered_form


@dataclass
class RegistryVerdict:
    """What checking the project's schemas against a registry found."""

    url: str
    checked: list[tuple[str, str]] = field(default_factory=list)  # (type, subject)
    problems: list[str] = field(default_factory=list)

    def line(self, types: int) -> str:
        """The summary line `logwheel schemas check` prints."""
        if not self.checked:
            return (
                f"registry {self.url}: no subject's latest version is one of the project's "
                f"{types} types: nothing to check"
            )
        pairs = ", ".join(f"{name} -> {subject}" for name, subject in self.checked)
        verdict = (
            f"{len(self.problems)} incompatible change(s)" if self.problems else "all compatible"
        )
        return f"registry {self.url}: {len(self.checked)} subject(s) checked ({pairs}): {verdict}"


def check_against_registry(schemas: Schemas, settings: RegistrySettings) -> RegistryVerdict:
    """Every type of `schemas` against the latest version of each subject of the registry
    `settings` name that holds it (`RegistryConfigurationError` naming the URL if it does not
    answer)."""
    registry = connect(settings)
    verdict = RegistryVerdict(registry.url)
    for subject in sorted(registry.subjects()):
        latest = registry.latest(subject)
        if (latest.schema.schema_type or "AVRO") != "AVRO":
            continue
        theirs = json.loads(latest.schema.schema_str)
        name = full_name(theirs)
        if name is None or name not in schemas:
            continue
        verdict.checked.append((name, subject))
        mine = registered_form(schemas[name], schemas.named)
        level = registry.compatibility(subject)
        label = (
            f"{name} against subject {subject} v{latest.version} (id {latest.schema_id}) "
            f"at {registry.url}, {level or 'no'} compatibility level"
        )
        found = against(name, json.loads(mine), theirs, label, directions(level))
        if found:
            verdict.problems += found
        elif level not in (None, "NONE") and not registry.accepts(subject, mine):
            verdict.problems.append(
                f"{label}: the registry's own {level} check refuses {name} (logwheel's "
                "rules name no field)"
            )
    return verdict
