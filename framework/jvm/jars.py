"""Where the JVM parts' jars are, and fetching them once: an installed logwheel has no
checkout to run `make jars` in.

A part's jars are looked up in order: the directory its environment variable names
(`LOGWHEEL_KAFKA_JARS`, `LOGWHEEL_SPARK_JARS`, `LOGWHEEL_REGISTRY_JARS`), the checkout's
`ops/jars/<part>` (filled by `make jars`), then the user cache
`$LOGWHEEL_HOME/jars/<part>-<version>` (LOGWHEEL_HOME defaults to ~/.cache/logwheel), which the
first use fills from Maven Central through Maven and the pom shipped in this package: into a
temporary directory renamed when complete, under a lock, so an interrupted or concurrent fetch
never leaves half a directory behind.

Most parts are a classpath, copied as Maven resolves it; the Schema Registry is one runnable
jar that Maven builds (`mvn package`, about two minutes the first time, seconds once
~/.m2 holds its dependencies).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from rich.console import Console

from framework.errors import ConfigurationError
from framework.private_files import private_dir

CHECKOUT = Path(__file__).resolve().parents[2]
PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:2.8"
_UNREACHABLE = re.compile(
    r"Could not (transfer|resolve)|Unknown ?Host|Connection refused|timed out|unreachable"
)


@dataclass(frozen=True)
class Part:
    """One JVM part: its pom (package data), the environment variable that points at jars
    already fetched, the file that shows a directory holds it, and the command that needs it."""

    name: str
    env: str
    marker: str
    needed_by: str
    built: bool = False
    """The pom builds one runnable jar (`mvn package`, its `*-runner.jar`) instead of naming a
    classpath to copy."""


KAFKA = Part("kafka", "LOGWHEEL_KAFKA_JARS", "kafka_2.13-*.jar", "logwheel broker start")
SPARK = Part("spark-kafka", "LOGWHEEL_SPARK_JARS", "spark-sql-kafka-*.jar", "logwheel backfill")
KAFKA_TOOLS = Part(
    "kafka-tools",
    "LOGWHEEL_KAFKA_TOOLS_JARS",
    "kafka-tools-[0-9]*.jar",
    "kafka-transactions.sh (the chaos run's check for hanging transactions)",
)
REGISTRY = Part(
    "registry",
    "LOGWHEEL_REGISTRY_JARS",
    "apicurio-registry-*-runner.jar",
    "logwheel registry start",
    built=True,
)


def home() -> Path:
    return Path(os.environ.get("LOGWHEEL_HOME") or Path.home() / ".cache" / "logwheel")


def pom_version(part: Part, prop: str) -> str:
    """A `<prop>` of the part's pom (the version its cache directory is named for)."""
    text = (resources.files("framework.jvm") / part.name / "pom.xml").read_text()
    found = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", text)
    if found is None:
        raise ConfigurationError(f"framework/jvm/{part.name}/pom.xml has no <{prop}>")
    return found.group(1)


def locate(part: Part, version: str, properties: dict[str, str] | None = None) -> Path:
    """The directory of `part`'s jars at `version`, fetched into the cache if need be."""
    env = os.environ.get(part.env)
    if env:
        directory = Path(env)
        if not any(directory.glob(part.marker)):
            raise ConfigurationError(
                f"{part.env}={env} holds no {part.marker}: point it at the part's jars, or "
                f"unset it to let {part.needed_by} fetch them"
            )
        return directory
    checkout = CHECKOUT / "ops" / "jars" / part.name
    if any(checkout.glob(part.marker)):
        return checkout
    cached = home() / "jars" / f"{part.name}-{version}"
    if not any(cached.glob(part.marker)):
        fetch(part, cached, properties or {})
    return cached


def fetch(part: Part, into: Path, properties: dict[str, str]) -> Path:
    """Copy the runtime classpath of `part`'s pom into `into` with Maven, or for a built part
    build its jar there (one process at a time: the others wait and find it done)."""
    into = into.resolve()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigurationError(
            f"{part.needed_by} needs Maven to fetch {part.name}'s jars once: install it "
            f"(apt-get install maven) or set {part.env} to a directory of them"
        )
    if shutil.which("java") is None:
        raise ConfigurationError(
            f"{part.needed_by} needs Java 17+: install it (apt-get install openjdk-17-jre-headless)"
        )
    if not into.parent.exists():  # a cache of ours: private; a directory given is left as is
        private_dir(into.parent)
    with open(into.parent / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if any(into.glob(part.marker)):  # another process fetched them meanwhile
            return into
        with tempfile.TemporaryDirectory(dir=into.parent, prefix=f".{into.name}.") as tmp:
            work = Path(tmp)
            _maven(mvn, part, work / "jars", properties, into)
            shutil.rmtree(into, ignore_errors=True)
            (work / "jars").rename(into)
    return into


def _maven(mvn: str, part: Part, out: Path, properties: dict[str, str], into: Path) -> None:
    """Run Maven on `part`'s pom in `out`'s parent (a fresh temporary directory), leaving the
    jars in `out`; its output goes to a log kept beside the cache when it fails."""
    source = resources.files("framework.jvm")
    work = out.parent
    pom, settings, log = work / "pom.xml", work / "settings.xml", work / "mvn.log"
    _copy(source / part.name, work)  # the pom, and the sources a built part compiles
    # every repository a pom names goes to Maven Central, the one registry logwheel uses
    settings.write_text((source / "settings.xml").read_text())
    command = [mvn, "-q", "-B", "-s", str(settings), "-f", str(pom)]
    if part.built:
        command += ["package", "-DskipTests"]
        doing = "building its jar with Maven (up to 2 minutes if ~/.m2 lacks its parts)"
    else:
        command += [f"{PLUGIN}:copy-dependencies", "-DincludeScope=runtime"]
        command += [f"-DoutputDirectory={out}"]
        doing = "fetching its jars from Maven Central"
    command += [f"-D{k}={v}" for k, v in properties.items()]
    console = Console(stderr=True)
    if part.built:  # minutes, not seconds: said even where no spinner shows
        console.print(f"{part.name}: {doing} into {into} ...", soft_wrap=True)
    began = time.monotonic()
    with console.status(f"{part.name}: {doing} into {into} ..."), log.open("w") as output:
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, cwd=work)
    if done.returncode == 0 and part.built and not _take_built(part, work / "target", out):
        with log.open("a") as output:
            output.write(f"\nlogwheel: Maven succeeded but built no {part.marker}\n")
        done.returncode = 1
    if done.returncode != 0:
        text = log.read_text(errors="replace")
        kept = into.parent / f"{part.name}-mvn.log"
        shutil.copy(log, kept)
        if _UNREACHABLE.search(text):
            raise ConfigurationError(
                f"cannot download {part.name}'s jars from Maven Central (details: {kept}): "
                f"check the network or the proxy in ~/.m2/settings.xml, or set {part.env}"
            )
        verb = "building" if part.built else "fetching"
        raise ConfigurationError(f"Maven failed {verb} {part.name}'s jars (details: {kept})")
    seconds = time.monotonic() - began
    jars = sorted(out.glob("*.jar"))
    if part.built:
        size = sum(jar.stat().st_size for jar in jars) / 1e6
        what = f"built {jars[0].name} ({size:.0f} MB) in {seconds:.0f}s"
    else:
        what = f"{len(jars)} jars fetched"
    console.print(f"{part.name}: {what} into {into}", soft_wrap=True)


def _copy(source: Traversable, into: Path) -> None:
    for entry in source.iterdir():
        if entry.is_dir():
            (into / entry.name).mkdir()
            _copy(entry, into / entry.name)
        else:
            (into / entry.name).write_bytes(entry.read_bytes())


def _take_built(part: Part, target: Path, out: Path) -> bool:
    """Move the jar Maven built (`part.marker` in `target`) into `out`; whether there was one."""
    built = sorted(target.glob(part.marker))
    if built:
        out.mkdir(parents=True, exist_ok=True)
        for jar in built:
            jar.rename(out / jar.name)
    return bool(built)


def kafka_jars() -> Path:
    """The directory of the Kafka broker's jars."""
    return locate(KAFKA, pom_version(KAFKA, "kafka.version"))


def kafka_tools_classpath() -> str:
    """The classpath of Kafka's command line tools (`org.apache.kafka.tools.*`): their jar,
    fetched once, after the broker's jars, which hold everything else they need."""
    tools = locate(KAFKA_TOOLS, pom_version(KAFKA_TOOLS, "kafka.version"))
    return f"{kafka_jars()}/*{os.pathsep}{tools}/*"


def spark_jars(spark_version: str) -> list[Path]:
    """Spark's Kafka connector for `spark_version` (the installed pyspark's), and its
    dependencies pyspark lacks."""
    directory = locate(SPARK, spark_version, {"spark.version": spark_version})
    return sorted(directory.glob("*.jar"))


def registry_jar() -> Path:
    """The Schema Registry's runnable jar (Apicurio Registry), built once if need be."""
    directory = locate(REGISTRY, pom_version(REGISTRY, "apicurio.version"))
    return sorted(directory.glob(REGISTRY.marker))[-1]
