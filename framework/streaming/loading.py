"""What a command loads before it runs anything: the pipeline `MODULE:ATTR` names, and the
tables of its TOML `--config` file ([kafka], [spark], [registry])."""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
from typing import Any

from framework.core.pipeline import Pipeline, PipelineError
from framework.kafka.config import expand_env
from framework.kafka.registry_settings import RegistrySettings
from framework.kafka.registry_settings import registry_settings as parse_registry


def load_pipeline(ref: str) -> Pipeline:
    """Import `module:attr` (e.g. `jobs.zeitgeist:pipeline`) and check it is a Pipeline. The
    current directory is searched first, as `python -m` does: a job lives in its own
    repository, and `logwheel` is a console script of an installed package."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise PipelineError(f"{ref!r} must be MODULE:ATTR, e.g. jobs.wordcount:pipeline")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise PipelineError(
            f"cannot import {module_name!r} ({error}): check the name and PYTHONPATH"
        ) from None
    pipeline = getattr(module, attr, None)
    if not isinstance(pipeline, Pipeline):
        raise PipelineError(f"{ref} is not a logwheel Pipeline (found {type(pipeline).__name__})")
    pipeline.validate()
    return pipeline


def kafka_settings(config_file: str | None) -> dict[str, Any]:
    """The `[kafka]` table of a TOML config file: client settings passed through, with
    `${VAR}` references to the environment expanded (a missing variable fails at start)."""
    return expand_env(config_table(config_file, "kafka"), f"--config {config_file} [kafka]")


def spark_settings(config_file: str | None) -> dict[str, Any]:
    """The `[spark]` table of a TOML config file: Spark settings (`spark.executor.memory`,
    `spark.kubernetes.container.image`, ...) for `logwheel backfill`, with `${VAR}` references
    expanded as in `[kafka]` (a keystore password stays out of files); Spark gets them in a
    0600 properties file, not on a command line (framework/backfill/session.py)."""
    return expand_env(config_table(config_file, "spark"), f"--config {config_file} [spark]")


def registry_settings(config_file: str | None) -> RegistrySettings | None:
    """The `[registry]` table of a TOML config file (None without one): the Schema Registry's
    URL, subject strategy and client settings (auth, TLS), checked at start
    (framework/kafka/registry_settings.py)."""
    table = config_table(config_file, "registry")
    return parse_registry(table, f"--config {config_file} [registry]") if table else None


def config_table(config_file: str | None, name: str) -> dict[str, Any]:
    """Table `name` of a TOML config file ({} without a file or table)."""
    if config_file is None:
        return {}
    try:
        with open(config_file, "rb") as f:
            table = tomllib.load(f).get(name, {})
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PipelineError(f"--config {config_file}: {error}") from None
    if not isinstance(table, dict):
        raise PipelineError(f"--config {config_file}: [{name}] must be a table of settings")
    return table
