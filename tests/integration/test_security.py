"""The secure broker (`logwheel broker start --secure`): SASL_SSL with SCRAM, ACLs required.

A broker of this module's own (own home, own port), started and stopped here: anonymous and
wrong-password clients are refused; a wordcount job that has only the ACLs `logwheel acls`
grants (its `<pipeline>.` prefix plus its streams) creates its own topics and counts exactly
once; each part of a pipeline (computations, an injector, a PostgreSQL sink, the queries of a
computation's state) works as its own user with only its own ACLs and is refused another
part's topics; a job without ACLs is refused; and no secret appears in anything the run
printed or logged.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from framework.broker.embedded import Broker
from framework.broker.security import ADMIN_USER, JOB_USER, PASSWORD_VARS
from framework.core.api import Computation
from framework.core.pipeline import InjectorWatermark, Pipeline
from framework.errors import ConfigurationError
from framework.jvm.jars import kafka_jars
from framework.jvm.process import find_java
from framework.kafka.topics import pipeline_topics
from framework.ops.acls import create_acls, part_acls
from framework.query import StateClient
from framework.streaming.injector import Injector
from tests.support import REPO, Job, UniqueJob, Wordcount, produce, wait_for, wait_until_resettable

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> Broker:
    try:  # a machine with Docker instead of Java runs the other suites, not this one
        find_java("Kafka"), kafka_jars()
    except ConfigurationError as missing:
        pytest.skip(f"the secure broker is the embedded one: {missing}")
    broker = Broker(tmp_path_factory.mktemp("secure-broker"), secure=True)
    broker.start(port=0, timeout=180)
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def bootstrap(secure: Broker) -> str:
    return f"127.0.0.1:{secure.port()}"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    """Where every process of this module writes what it prints, for the grep for secrets."""
    return tmp_path_factory.mktemp("secure-outputs")


def passwords_env(secure: Broker) -> dict[str, str]:
    return {var: secure.credentials.password(user) for user, var in PASSWORD_VARS.items()}


def logwheel(secure: Broker, outputs: Path, name: str, *args: str, path: Path | None = None):
    """Run `logwheel ARGS` with the users' passwords in its environment; its output is kept."""
    env = {**os.environ, **passwords_env(secure)}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (path, REPO) if p)
    done = subprocess.run(
        [sys.executable, "-m", "framework.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    (outputs / f"{name}.out").write_text(done.stdout + done.stderr)
    return done


def refused(bootstrap: str, settings: dict) -> list[KafkaError]:
    """The errors a client with `settings` meets asking for metadata (none: it was served)."""
    errors: list[KafkaError] = []
    admin = AdminClient(
        {**settings, "bootstrap.servers": bootstrap, "error_cb": errors.append, "logger": _QUIET}
    )
    try:
        admin.list_topics(timeout=5)
    except KafkaException as error:
        admin.poll(1)  # serves error_cb
        return errors or [error.args[0]]
    return []


_QUIET = logging.getLogger("tests.security.librdkafka")
_QUIET.propagate = False


def test_home_keeps_secrets_private(secure):
    creds = secure.credentials
    for private in (creds.secrets_file, creds.keystore, creds.truststore, creds.ca_store):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    assert stat.S_IMODE(secure.config_file.stat().st_mode) == 0o600
    for user in (ADMIN_USER, JOB_USER):
        text = creds.settings_file(user).read_text()
        assert f"${{{PASSWORD_VARS[user]}}}" in text
        assert creds.password(user) not in text


def test_home_data_and_metadata_directories_are_private(secure):
    """Kafka's data (every topic) and the metadata log (SCRAM keys, ACLs) are the owner's
    alone: the home and what the JVM created in it are 0700 (umask 077), so another local
    user cannot read around SASL."""
    data = [secure.data_dir, secure.controller.data_dir]
    for directory in [secure.home, *(d for d in data if d.exists())]:
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    logs = [p for p in secure.data_dir.rglob("*.log") if p.is_file()]
    assert logs, "no segment to check"
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in logs), logs[:3]


def test_start_says_how_to_connect_without_a_secret(secure, bootstrap, outputs):
    """`logwheel broker start --secure` on the running broker (idempotent): where the CA,
    the client settings and the passwords file are, the bootstrap alone on the last line."""
    env = {**os.environ, "LOGWHEEL_BROKER_DIR": str(secure.home)}
    for action in ("start", "status"):
        done = subprocess.run(
            [sys.executable, "-m", "framework.cli", "broker", action, "--secure"],
            env=env, capture_output=True, text=True, cwd=REPO, timeout=120,
        )  # fmt: skip
        (outputs / f"broker-{action}.out").write_text(done.stdout + done.stderr)
        assert done.returncode == 0, done.stderr
    start = (outputs / "broker-start.out").read_text()
    assert start.splitlines()[-1] == bootstrap
    creds = secure.credentials
    for path in (creds.ca_pem, creds.secrets_file, creds.settings_file(JOB_USER)):
        assert str(path) in start


def test_no_password_on_a_command_line(secure):
    """The broker's and kafka-storage's command lines show no password (ps shows them to
    every local user): the SCRAM credentials go in an argument file the java launcher reads."""
    creds = secure.credentials
    broker_argv = Path(f"/proc/{secure.running_pid()}/cmdline").read_bytes().decode()
    args = creds.format_arguments()
    try:
        argument_file = Path(args[0].removeprefix("@"))
        assert stat.S_IMODE(argument_file.stat().st_mode) == 0o600
        assert "--add-scram" in argument_file.read_text()
    finally:
        creds.forget_format_arguments()
    assert not argument_file.exists()
    for secret in creds.secret_values():
        assert secret not in broker_argv
        assert secret not in " ".join(args)


def test_anonymous_and_wrong_password_clients_are_refused(secure, bootstrap):
    creds = secure.credentials
    assert refused(bootstrap, creds.client_settings(JOB_USER)) == []  # the control
    assert refused(bootstrap, {})  # PLAINTEXT: no TLS, no SASL
    tls_only = {"security.protocol": "SSL", "ssl.ca.location": str(creds.ca_pem)}
    assert refused(bootstrap, tls_only)
    wrong = refused(bootstrap, creds.client_settings(JOB_USER, "not-the-password"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in wrong), wrong
    unknown = {**creds.client_settings(JOB_USER), "sasl.username": "nobody"}
    assert any(e.code() == KafkaError._AUTHENTICATION for e in refused(bootstrap, unknown))


def test_job_with_only_its_prefixed_acls_counts_exactly_once_and_resets(
    secure, bootstrap, outputs, tmp_path
):
    """With the ACLs `logwheel acls --reset` grants and nothing else, the job user runs
    wordcount (exact counts), reads its status, and resets count-words (--wipe-state), after
    which a second run counts every word again, exactly once more."""
    creds = secure.credentials
    admin = creds.client_settings(ADMIN_USER)
    wc = Wordcount(bootstrap, tmp_path, kafka=admin, create=False)
    _create_streams(bootstrap, admin, wc.pipeline)  # the streams only: the job makes the rest
    ref = f"{wc.unique.module}:pipeline"
    admin_toml, job_toml = creds.settings_file(ADMIN_USER), creds.settings_file(JOB_USER)
    acls = ["acls", ref, "--principal", f"User:{JOB_USER}", "--bootstrap", bootstrap]
    done = logwheel(secure, outputs, "acls", *acls, "--reset", "--create", "--config",
                    str(admin_toml), path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"TOPIC prefixed '{wc.name}.count-words.'" in done.stdout

    wc.send_lines(1_000)
    job = wc.job(config=job_toml, env=passwords_env(secure), log=outputs / "job.log").start()
    try:
        counts = wc.read_counts(timeout=180)
        status = logwheel(secure, outputs, "status", "status", ref, "--json", "--bootstrap",
                          bootstrap, "--config", str(job_toml), path=tmp_path)  # fmt: skip
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    wc.check_exact(counts)
    assert status.returncode == 0, status.stderr
    assert status.stdout.count('"computation"') >= 8  # 2 computations x 4 partitions
    internal = [s.name for s in pipeline_topics(wc.pipeline) if s.kind != "stream"]
    existing = AdminClient({**admin, "bootstrap.servers": bootstrap}).list_topics(timeout=30)
    assert set(internal) <= set(existing.topics), "the job made its own topics"
    assert all(name.startswith(f"{wc.name}.") for name in internal)

    job_settings = creds.client_settings(JOB_USER)
    wait_until_resettable(wc.pipeline, "count-words", bootstrap, tmp_path, kafka=job_settings)
    command = ["reset", ref, "--computation", "count-words", "--to", "earliest", "--wipe-state"]
    command += ["--state-dir", str(tmp_path / "state-a"), "--bootstrap", bootstrap]
    reset = logwheel(secure, outputs, "reset", *command, "--config", str(job_toml), path=tmp_path)
    assert reset.returncode == 0, reset.stderr
    job = wc.job(config=job_toml, env=passwords_env(secure), log=outputs / "job.log").start()
    try:
        again = wc.read_counts(timeout=180, expect=2 * wc.total())
    finally:
        assert job.stop() == 0, job.output()[-3000:]
    wc.check_exact(again, times=2)


def test_each_computation_and_injector_with_only_its_own_acls(secure, bootstrap, outputs, tmp_path):
    """Per-part principals (`logwheel acls --principal 'User:<p>-{name}'`): each computation
    runs as its own user with exactly its ACLs and wordcount counts exactly once; split-words'
    user can neither read nor write count-words' changelog; an injector's user writes its
    stream and channel but not a changelog. State dirs are 0700, the instance id 0600."""
    creds = secure.credentials
    admin = creds.client_settings(ADMIN_USER)
    wc = Wordcount(bootstrap, tmp_path, kafka=admin, create=False)
    _create_streams(bootstrap, admin, wc.pipeline)
    ref = f"{wc.unique.module}:pipeline"
    users = {name: f"{wc.name}-{name}" for name in (*wc.pipeline.computations, "feeder")}
    passwords = {user: secrets.token_urlsafe(18) for user in users.values()}
    _add_users(bootstrap, admin, passwords)
    done = _create_part_acls(secure, bootstrap, outputs, "acls-per-part", ref, wc.name, tmp_path)
    assert f"TOPIC prefixed '{wc.name}.split-words.'" in done.stdout
    assert f"TOPIC prefixed '{wc.name}.'" not in done.stdout
    assert " from *" not in done.stdout

    def settings(name: str) -> dict:
        return _user_settings(secure, users[name], passwords[users[name]])

    wc.send_lines(500)
    jobs = []
    for name in wc.pipeline.computations:
        jobs.append(_part_job(wc.unique, name, settings(name), tmp_path, outputs).start())
    try:
        counts = wc.read_counts(timeout=180)
    finally:
        stopped = [job.stop() for job in jobs]
    assert stopped == [0, 0], [job.output()[-2000:] for job in jobs]
    wc.check_exact(counts)
    for name in wc.pipeline.computations:
        state = tmp_path / f"state-{name}" / wc.name / name
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert stat.S_IMODE((state / "instance-id").stat().st_mode) == 0o600

    other = wc.pipeline["count-words"].changelog
    reader = f"{wc.pipeline['split-words'].group}.reader"  # a group split-words may use
    # (results named first: a failed assert then shows no password of the settings)
    refused = _write_refused(bootstrap, settings("split-words"), other)
    assert refused, "split-words' user wrote count-words' changelog"
    refused = _read_refused(bootstrap, settings("split-words"), other, reader)
    assert refused, "split-words' user read count-words' changelog"
    refused = _write_refused(bootstrap, settings("count-words"), other)  # the controls
    assert not refused, "count-words' user could not write its own changelog"
    refused = _read_refused(bootstrap, settings("count-words"), other, f"{other}.reader")
    assert not refused, "count-words' user could not read its own changelog"

    fed = Pipeline(f"{wc.name}-fed", partitions=1)
    fed.source(f"{wc.prefix}feed", watermark=InjectorWatermark("feeder"))
    feed, echoed = f"{wc.prefix}feed", f"{wc.prefix}echoed"
    fed.computation("echo", Echo, inputs={feed: None}, outputs={echoed: None})
    _create_streams(bootstrap, admin, fed)
    create_acls(part_acls(fed, "feeder", f"User:{users['feeder']}", host="127.0.0.1"),
                bootstrap, admin)  # fmt: skip
    with Injector(fed, "feeder", bootstrap=bootstrap, kafka=settings("feeder")) as feeder:
        now = int(time.time() * 1000)
        feeder.send(feed, {"line": "a b"}, key="k", timestamp=now)
        feeder.advance(now)
    refused = _write_refused(bootstrap, settings("feeder"), other)
    assert refused, "the injector's user wrote a changelog"
    refused = _write_refused(bootstrap, settings("feeder"), wc.lines_topic)
    assert refused, "the injector's user wrote another stream"


class Echo(Computation):
    def process_record(self, ctx, record):
        ctx.produce(f"{record.stream.removesuffix('feed')}echoed", record.value)


def test_a_sink_and_the_queries_with_only_their_own_acls_write_once_and_read_state(
    secure, bootstrap, outputs, postgres, tmp_path
):
    """Per-part principals for a computation, its PostgreSQL sink and the queries of its
    state: the sink's printed ACLs are Read on its input and group and Write on its dead
    letters, nothing under the computation's prefix; run as processes of their own with only
    those ACLs, the computation and the sink write every record into the table exactly once,
    and the queries' user gets a committed state through `StateClient`. Neither the sink's
    user may write the computation's changelog nor the queries' user read it."""
    creds = secure.credentials
    admin = creds.client_settings(ADMIN_USER)
    table = f"t_{secrets.token_hex(5)}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(APPENDED_TOTALS.format(table=table))
    unique = UniqueJob(bootstrap, tmp_path, "tests.integration.sink_job:totals_sink", "sink",
                       postgres.dsn(), table, 50, None, create=False)  # fmt: skip
    pipeline, name = unique.pipeline, unique.name
    _create_streams(bootstrap, admin, pipeline)
    (totals,) = pipeline["totals"].outputs
    changelog = pipeline["totals"].changelog
    users = {part: f"{name}-{part}" for part in ("totals", "db", "queries")}
    passwords = {user: secrets.token_urlsafe(18) for user in users.values()}
    _add_users(bootstrap, admin, passwords)
    ref = f"{unique.module}:pipeline"
    done = _create_part_acls(secure, bootstrap, outputs, "acls-sink", ref, name, tmp_path)
    sink = [line for line in done.stdout.splitlines() if f" User:{users['db']} " in line]
    for grant in (f"READ on TOPIC literal '{totals}'", f"READ on GROUP literal '{name}.db'",
                  f"WRITE on TOPIC literal '{name}.db.dlq'"):  # fmt: skip
        assert any(grant in line for line in sink), (grant, sink)
    assert not [line for line in sink if f"'{name}.totals." in line or "prefixed" in line], sink
    queries = [line for line in done.stdout.splitlines() if f" User:{users['queries']} " in line]
    assert queries and not [line for line in queries if changelog in line], queries

    def settings(part: str) -> dict:
        return _user_settings(secure, users[part], passwords[users[part]])

    rng = random.Random(5)
    amounts = [(f"k{rng.randrange(20)}", rng.randrange(1, 100)) for _ in range(300)]
    produce(bootstrap, f"{unique.prefix}amounts", [(k, {"amount": a}, None) for k, a in amounts],
            admin)  # fmt: skip
    computation = _part_job(unique, "totals", settings("totals"), tmp_path, outputs)
    computation.args += ["--serve", "0"]
    jobs = [computation.start(), _part_job(unique, "db", settings("db"), tmp_path, outputs).start()]
    client = StateClient(pipeline, bootstrap=bootstrap, config={"kafka": settings("queries")},
                         deadline_s=60)  # fmt: skip
    truth: dict[str, dict[str, int]] = {}
    for key, amount in amounts:
        state = truth.setdefault(key, {"total": 0, "n": 0})
        state["total"], state["n"] = state["total"] + amount, state["n"] + 1

    def rows(statement: str) -> list[tuple]:
        with psycopg.connect(postgres.dsn()) as conn:
            return conn.execute(statement.format(table=table)).fetchall()

    def written() -> bool:
        for job in jobs:  # one that died (refused for good, say) fails the wait at once
            assert job.alive(), job.output()[-3000:]
        return rows("SELECT count(*) FROM {table}")[0][0] >= len(amounts)

    try:
        wait_for(written, 240, what=f"{len(amounts)} rows in the table (see {outputs}/db.log)")
        some = sorted(truth)[:3]
        wait_for(
            lambda: [client.get("totals", key) for key in some] == [truth[k] for k in some], 120,
            what="the queries' user to read the committed totals",
        )  # fmt: skip
    finally:
        client.close()
        stopped = [job.stop() for job in jobs]
    assert stopped == [0, 0], [job.output()[-2000:] for job in jobs]
    count, distinct = rows("SELECT count(*), count(DISTINCT logwheel_id) FROM {table}")[0]
    assert (count, distinct) == (len(amounts), len(amounts)), (count, distinct)
    updates = rows("SELECT key, array_agg(n ORDER BY n), max(total) FROM {table} GROUP BY key")
    assert {k: (ns, total) for k, ns, total in updates} == {
        k: (list(range(1, v["n"] + 1)), v["total"]) for k, v in truth.items()
    }

    refused = _write_refused(bootstrap, settings("db"), changelog)
    assert refused, "the sink's user wrote the computation's changelog"
    reader = f"{pipeline['totals'].group}.reader"  # the group the queries' user reads with
    refused = _read_refused(bootstrap, settings("queries"), changelog, reader)
    assert refused, "the queries' user read the computation's changelog"


APPENDED_TOTALS = "CREATE TABLE {table} (key text, total bigint, n integer, logwheel_id text)"
"""The sink's table for `totals_sink(..., key=None)`: a row per update of a key's total."""


def _add_users(bootstrap: str, admin: dict, passwords: dict[str, str]) -> None:
    """SCRAM users made by the administrator (as `kafka-configs --alter --add-config` does)."""
    client = AdminClient({**admin, "bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upserts = [UserScramCredentialUpsertion(u, info, p.encode()) for u, p in passwords.items()]
    for future in client.alter_user_scram_credentials(upserts).values():
        future.result(60)


def _create_part_acls(
    secure: Broker, bootstrap: str, outputs: Path, out: str, ref: str, prefix: str, path: Path
) -> subprocess.CompletedProcess:
    """`logwheel acls REF --principal 'User:<prefix>-{name}' --create` as the administrator:
    each part of the pipeline its own principal; what it printed (kept as `out`)."""
    done = logwheel(secure, outputs, out, "acls", ref, "--principal", f"User:{prefix}-{{name}}",
                    "--create", "--bootstrap", bootstrap, "--config",
                    str(secure.credentials.settings_file(ADMIN_USER)), path=path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _user_settings(secure: Broker, user: str, password: str) -> dict:
    """A client's settings as SCRAM user `user`: the job user's, with another name and
    password."""
    return {**secure.credentials.client_settings(JOB_USER), "sasl.username": user,
            "sasl.password": password}  # fmt: skip


def _part_job(unique: UniqueJob, name: str, settings: dict, tmp: Path, outputs: Path) -> Job:
    """`logwheel run --computation NAME` (a computation or a sink) as the user of
    `settings`: its `--config`'s [kafka] table carries them, the password as an environment
    variable's name (the file holds no secret)."""
    config = tmp / f"{name}.toml"
    var = f"LW_TEST_{name.upper().replace('-', '_')}_PASSWORD"
    kafka = {**settings, "sasl.password": f"${{{var}}}"}
    config.write_text("[kafka]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in kafka.items()))
    return unique.job(
        f"state-{name}",
        computations=[name],
        config=config,
        env={var: settings["sasl.password"]},
        log=outputs / f"{name}.log",
    )


def _write_refused(bootstrap: str, settings: dict, topic: str) -> bool:
    """Whether a producer with `settings` is refused writing `topic` (False: it was written)."""
    producer = Producer({**settings, "bootstrap.servers": bootstrap, "logger": _QUIET})
    failures: list = []
    producer.produce(topic, b"forged", b"k", on_delivery=lambda err, _: failures.append(err))
    producer.flush(60)
    assert failures, "no delivery report"
    if failures[0] is None:
        return False
    assert failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, failures
    return True


def _read_refused(bootstrap: str, settings: dict, topic: str, group: str) -> bool:
    """Whether a consumer with `settings` is refused `topic`: the broker will not even
    describe it (Read implies Describe, so no fetch can follow), and a subscription to it
    ends in an authorization error."""
    consumer = Consumer(
        {**settings, "bootstrap.servers": bootstrap, "group.id": group, "logger": _QUIET}
    )
    try:
        error = consumer.list_topics(topic, timeout=30).topics[topic].error
        if error is None:
            return False
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
        consumer.subscribe([topic])
        errors = wait_for(
            lambda: [m.error() for m in consumer.consume(10, 1.0) if m.error()],
            60,
            what="the subscription to be refused",
        )
    finally:
        consumer.close()
    return errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_job_without_acls_is_refused(secure, bootstrap, outputs, tmp_path):
    creds = secure.credentials
    admin = creds.client_settings(ADMIN_USER)
    wc = Wordcount(bootstrap, tmp_path, kafka=admin, create=False)
    _create_streams(bootstrap, admin, wc.pipeline)
    wc.send_lines(10)
    job = wc.job(
        config=creds.settings_file(JOB_USER),
        env=passwords_env(secure),
        log=outputs / "refused-job.log",
    ).start()
    try:
        wait_for(lambda: not job.alive(), 120, what="the job without ACLs to exit")
    finally:
        job.stop()
    assert job.proc.returncode == 1
    assert "not authorized to see or create it" in job.output(), job.output()[-2000:]
    # and its clients cannot write a stream of another pipeline, nor read one
    producer = Producer({**creds.client_settings(JOB_USER), "bootstrap.servers": bootstrap})
    failures: list[KafkaError] = []
    producer.produce(wc.lines_topic, b"{}", on_delivery=lambda err, _: failures.append(err))
    producer.flush(60)
    assert failures and failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, failures
    consumer = Consumer(
        {**creds.client_settings(JOB_USER), "bootstrap.servers": bootstrap, "group.id": wc.name}
    )
    consumer.assign([TopicPartition(wc.lines_topic, 0, OFFSET_BEGINNING)])
    try:
        errors = wait_for(
            lambda: [m.error() for m in consumer.consume(10, 1.0) if m.error()],
            60,
            what="the read to be refused",
        )
    finally:
        consumer.close()
    refusals = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}
    assert errors[0].code() in refusals, errors


def test_librdkafka_debug_dump_redacts_the_password(secure, bootstrap):
    """Even with `debug=conf` (a config dump), librdkafka does not log the password."""
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("tests.security.debug")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    settings = secure.credentials.client_settings(JOB_USER)
    config = {**settings, "bootstrap.servers": bootstrap, "debug": "conf,security"}
    admin = AdminClient({**config, "logger": logger})
    admin.list_topics(timeout=30)
    admin.poll(1)  # delivers the log lines to `logger`
    assert any("sasl.password = " in line for line in lines), "no config dump to check"
    assert not [line for line in lines if settings["sasl.password"] in line]


def test_no_secret_in_any_output_or_log(secure, outputs):
    """Last in this module: every output of the tests above and the broker's log."""
    files = [*outputs.iterdir(), secure.log_file]
    expected = {"acls.out", "status.out", "reset.out", "job.log", "refused-job.log"}
    expected |= {"broker-start.out", "broker-status.out"}
    assert {f.name for f in files} >= expected
    for secret in secure.credentials.secret_values():
        for path in files:
            assert secret not in path.read_text(errors="replace"), f"a secret in {path}"


def _create_streams(bootstrap: str, admin: dict, pipeline) -> None:
    client = AdminClient({**admin, "bootstrap.servers": bootstrap})
    streams = [s for s in pipeline_topics(pipeline) if s.kind == "stream"]
    new = [NewTopic(s.name, s.partitions, 1, config=dict(s.config)) for s in streams]
    for future in client.create_topics(new, request_timeout=60).values():
        future.result()
    wait_for(
        lambda: {s.name for s in streams} <= set(client.list_topics(timeout=30).topics),
        60,
        what="the streams",
    )
