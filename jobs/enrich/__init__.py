"""Enrich: page views joined with user profiles (Samza §3.2, a stream-table join).

    profile-updates ─▶ profiles ─▶ (state) enrich.profiles.changelog
                                              │ table "profiles"
    page-views ─▶ enrich (key: user) ─────────┴─▶ enriched-page-views

`profiles` keeps each user's profile as its state (`enrich.Profile`); its changelog is the
table. `enrich` reads page views keyed by user and looks each one's user up in its local
replica of that changelog, as of the view's processing. A profile update {"user", "delete":
true} deletes the profile (a tombstone in the changelog). Run it with `logwheel run
jobs.enrich:pipeline`, or see it with `python -m jobs.enrich.demo`.
"""

from __future__ import annotations

from framework import Computation, Pipeline, key_by


class Profiles(Computation):
    """Applies profile updates to the user's profile (its state)."""

    state_schema = "enrich.Profile"

    def process_record(self, ctx, record):
        update = record.value
        if update.get("delete"):
            ctx.state.clear()
            return
        version = ctx.state.get("version", 0) + 1
        ctx.state.update(
            name=update.get("name", ctx.state.get("name", "")),
            country=update.get("country", ctx.state.get("country", "")),
            version=version,
        )


class Enrich(Computation):
    """Joins each page view with its user's profile as of its processing."""

    def __init__(self, out: str = "enriched-page-views") -> None:
        self.out = out

    def process_record(self, ctx, record):
        view = record.value
        profile = ctx.table("profiles").get(ctx.key) or {}
        ctx.produce(
            self.out,
            {
                "id": view["id"],
                "user": view["user"],
                "url": view["url"],
                "name": profile.get("name"),
                "country": profile.get("country"),
                "profile_version": profile.get("version"),
            },
        )


def build(name: str = "enrich", prefix: str = "", guarantee: str = "exactly_once") -> Pipeline:
    """The enrich pipeline; tests build it under names of their own (streams are global)."""
    updates, views, enriched = (
        f"{prefix}{s}" for s in ("profile-updates", "page-views", "enriched-page-views")
    )
    pipeline = Pipeline(name)
    pipeline.source(updates)
    pipeline.source(views, schema="enrich.PageView")
    pipeline.computation(
        "profiles", Profiles, inputs={updates: key_by("user")}, guarantee=guarantee
    )
    pipeline.computation(
        "enrich",
        lambda: Enrich(enriched),
        inputs={views: key_by("user")},
        outputs={enriched: "enrich.EnrichedPageView"},
        tables={"profiles": f"{name}.profiles.changelog"},
        guarantee=guarantee,
    )
    return pipeline


pipeline = build()
