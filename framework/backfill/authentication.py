"""Who may talk to a backfill's Spark. Its tasks carry the `[kafka]` and `[registry]` secrets
(pickled into every task), and whoever can submit work to its executors runs code as the
user who started them; so every Spark connection of a backfill is authenticated
(`spark.authenticate`), and the driver of a local master listens on loopback alone:

- a local master (`local`, `local[N]`, `local[N,F]`): Spark makes a secret for the
  application (one per backfill) itself; the driver's RPC and block manager bind 127.0.0.1;
- YARN and Kubernetes: Spark makes a secret per application and hands it to the executors
  (on Kubernetes, in the executor pods' environment);
- any other master (a standalone cluster, `spark://`): the secret its master and workers share
  must be in `spark.authenticate.secret` (`[spark]` of `--config`); the cluster logwheel starts
  (`standalone.py`) makes one of its own and gives it to its daemons in a private file.

Off a local master the connections are encrypted too (`spark.network.crypto.enabled`): they
carry the tasks, and with them the secrets. A secret reaches Spark in the session's 0600
properties file (`session.py`), never on a command line; Spark's standalone workers hand it to
their executors in the environment (`_SPARK_AUTH_SECRET`, readable by its user alone), and
executors fetch the rest of the settings over the authenticated connection. `spark.authenticate
= false` in `[spark]` turns all this off, for a cluster that has no secret (`session` warns
what that allows)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

from framework.errors import ConfigurationError

LOOPBACK = "127.0.0.1"
AUTHENTICATE = "spark.authenticate"
SECRET = "spark.authenticate.secret"
LOOPBACK_DRIVER = {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK}
"""A driver reached on loopback alone (its RPC and its block manager)."""

_LOCAL = re.compile(r"local(\[(\*|\d+)(\s*,\s*\d+)?\])?")
_SECRET_OF_ITS_OWN = re.compile(r"yarn|k8s://.+")
"""Cluster managers for which Spark makes a secret per application and distributes it."""


def new_secret() -> str:
    """A fresh shared secret: 256 random bits, as hex (Spark's own are as long)."""
    return secrets.token_hex(32)


def is_local(master: str) -> bool:
    """Whether `master` runs the executors inside the driver's JVM."""
    return _LOCAL.fullmatch(master.strip()) is not None


def daemon_settings(secret: str) -> dict[str, str]:
    """The settings of a standalone master and its workers: only holders of `secret` connect
    (applications, workers), over encrypted connections; nobody kills an application through
    their web pages."""
    return {AUTHENTICATE: "true", SECRET: secret, "spark.network.crypto.enabled": "true",
            "spark.ui.killEnabled": "false"}  # fmt: skip


def authenticates(conf: Mapping[str, Any]) -> bool:
    """Whether `conf` leaves authentication on (it is, unless `spark.authenticate` is false)."""
    return str(conf.get(AUTHENTICATE, "true")).strip().lower() != "false"


def driver_settings(master: str, conf: Mapping[str, Any]) -> dict[str, str]:
    """The settings a driver of `master` gets besides `conf` (which names the user's own and
    wins): the driver on loopback for a local master; authentication on, with encryption for
    any master but a local one. A master whose secret Spark cannot make, and `conf` does not
    give, fails here in one line naming the fix."""
    local = is_local(master)
    settings = dict(LOOPBACK_DRIVER) if local else {}
    if authenticates(conf):
        settings[AUTHENTICATE] = "true"
    else:
        return {key: value for key, value in settings.items() if key not in conf}
    if not local:
        settings["spark.network.crypto.enabled"] = "true"
    if not local and not _SECRET_OF_ITS_OWN.fullmatch(master.strip()) and not conf.get(SECRET):
        raise ConfigurationError(
            f"the Spark master {master} needs the secret its cluster shares: put it in "
            f'[spark] of --config as "{SECRET}" = "${{SPARK_SECRET}}" (the cluster\'s '
            f"daemons need {AUTHENTICATE} = true and the same secret), or "
            f'"{AUTHENTICATE}" = false for a cluster without one'
        )
    return {key: value for key, value in settings.items() if key not in conf}
