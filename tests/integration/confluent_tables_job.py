"""A stream-table join over another team's topic in the Confluent wire format (tests only):
`profiles` is their compacted topic of `team.Profile` values, written with confluent-kafka's
`AvroSerializer`; `views` (JSON, keyed by user) is joined with it, each view with the user's
profile as of its processing, into `joined` (JSON). The pipeline has a registry, so the table,
declared with a schema, is read in the wire format and resolved to the job's `team.Profile`;
the JSON streams say `format="json"`."""

from __future__ import annotations

from framework import Computation, Pipeline

PROFILE = {  # the job's reader schema: their v2 (v1 lacks region, whose default fills in)
    "type": "record",
    "name": "Profile",
    "namespace": "team",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "tier", "type": "string"},
        {"name": "region", "type": "string", "default": "unknown"},
    ],
}


class Join(Computation):
    """Each view with its user's profile (None for a user without one)."""

    def __init__(self, out: str) -> None:
        self.out = out

    def process_record(self, ctx, record):
        profile = ctx.table("profiles").get(ctx.key) or {}
        ctx.produce(
            self.out,
            {
                "id": record.value["id"],
                "tier": profile.get("tier"),
                "region": profile.get("region"),
            },
        )


def build(name: str, prefix: str, registry: str) -> Pipeline:
    profiles, views, joined = (f"{prefix}{s}" for s in ("profiles", "views", "joined"))
    pipeline = Pipeline(name, partitions=2, registry=registry)
    pipeline.source(profiles, schema="team.Profile")
    pipeline.source(views, format="json")
    pipeline.computation(
        "join",
        lambda: Join(joined),
        inputs={views: None},
        outputs={joined: None},
        formats={joined: "json"},
        tables={"profiles": profiles},
        guarantee="exactly_once",
    )
    return pipeline
