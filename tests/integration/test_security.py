"""The secure broker (`logwheel broker start --secure`): SASL_SSL with SCRAM, ACLs required.

A broker of this module's own (own home, own port), started and stopped here: anonymous and
wrong-password clients are refused; a wordcount job that has only the ACLs `logwheel acls`
grants (its `<pipeline>.` prefix plus its streams) creates its own topics and counts exactly
once; a job without ACLs is refused; and no secret appears in anything the run printed or
logged.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from framework.broker import host
from framework.broker.embedded import Broker
from framework.broker.security import ADMIN_USER, JOB_USER, PASSWORD_VARS
from framework.errors import ConfigurationError
from framework.jvm.jars import kafka_jars
from framework.kafka.topics import pipeline_topics
from tests.support import REPO, Wordcount, wait_for, wait_until_resettable

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> Broker:
    try:  # a machine with Docker instead of Java runs the other suites, not this one
        host.find_java(), kafka_jars()
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
    assert f"TOPIC prefixed '{wc.name}.'" in done.stdout

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
