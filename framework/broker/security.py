"""The secure embedded broker's credentials: TLS certificates, SCRAM users, listener settings.

`logwheel broker start --secure` runs the embedded broker with SASL_SSL (SCRAM-SHA-512) for
clients and mutual TLS for its controller, the StandardAuthorizer on and nothing allowed
without an ACL. Everything secret lives in `HOME/security/`, created at the first start:

- `ca.pem` (public): the certificate authority clients trust (`ssl.ca.location`);
- `ca.p12`, `broker.p12`, `truststore.p12` (mode 0600): the CA's key, the broker's key and
  certificate (CN=logwheel-broker, for 127.0.0.1 and localhost), the JVM's trust store;
- `secrets.env` (mode 0600): `LOGWHEEL_ADMIN_PASSWORD`, `LOGWHEEL_JOB_PASSWORD` and the key
  stores' password, as shell assignments (`set -a; . secrets.env; set +a`);
- `admin.toml`, `job.toml` (public): `[kafka]` client settings for the two users, whose
  passwords are `${VAR}` references to that environment, for `--config`.

Users: `admin` (a super user, which the broker also uses to talk to itself) and `job`, which
can do nothing until ACLs grant it (`logwheel acls`). Both are SCRAM credentials written into
the KRaft log when it is formatted (KIP-900), so the broker never starts without them. The
controller listener takes only clients that show the broker's own certificate, so the
cluster's metadata cannot be reached with a password alone.

Certificates come from Java's keytool (the broker needs Java anyway), passwords from
`secrets.token_urlsafe`; no password ever goes on a command line (keytool reads them from its
environment, kafka-storage from a 0600 argument file).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

from framework.errors import ConfigurationError
from framework.private_files import write_private

ADMIN_USER = "admin"
JOB_USER = "job"
MECHANISM = "SCRAM-SHA-512"
BROKER_DN = "CN=logwheel-broker"
CA_DN = "CN=logwheel-ca"
SAN = "SAN=ip:127.0.0.1,dns:localhost"
CERT_DAYS = "3650"
PASSWORD_VARS = {ADMIN_USER: "LOGWHEEL_ADMIN_PASSWORD", JOB_USER: "LOGWHEEL_JOB_PASSWORD"}
STORE_VAR = "LOGWHEEL_BROKER_STORE_PASSWORD"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class SecurityError(ConfigurationError):
    """Creating the secure broker's certificates failed; the message names the step."""


class Credentials:
    """The `security/` directory of one broker home."""

    def __init__(self, home: Path) -> None:
        self.dir = Path(home) / "security"
        self.ca_pem = self.dir / "ca.pem"
        self.ca_store = self.dir / "ca.p12"
        self.keystore = self.dir / "broker.p12"
        self.truststore = self.dir / "truststore.p12"
        self.secrets_file = self.dir / "secrets.env"

    def exists(self) -> bool:
        return self.secrets_file.exists()

    def settings_file(self, user: str) -> Path:
        """The `[kafka]` client settings of `user` (passwords as `${VAR}` references)."""
        return self.dir / f"{user}.toml"

    # -- creation (first start) ----------------------------------------------------------

    def create(self, keytool: str) -> None:
        """Passwords, CA, broker certificate and trust store, client settings; once."""
        if self.exists():
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        values = {var: secrets.token_urlsafe(24) for var in [*PASSWORD_VARS.values(), STORE_VAR]}
        self._make_certificates(keytool, values[STORE_VAR])
        for user in PASSWORD_VARS:
            self.settings_file(user).write_text(_settings_toml(self.client_settings(user, "")))
        lines = [f"{var}={value}" for var, value in values.items()]
        # The secrets file is written last: its presence says the directory is complete.
        write_private(self.secrets_file, "\n".join(lines) + "\n")

    def _make_certificates(self, keytool: str, store_password: str) -> None:
        for path in (self.ca_store, self.keystore, self.truststore, self.ca_pem):
            path.unlink(missing_ok=True)  # a half-made directory from an interrupted start
        env = {**os.environ, STORE_VAR: store_password}
        csr, signed = self.dir / "broker.csr", self.dir / "broker.pem"
        store = ["-storetype", "PKCS12", "-storepass:env", STORE_VAR]
        ca = ["-keystore", str(self.ca_store), *store]
        broker = ["-keystore", str(self.keystore), *store]
        key = ["-keyalg", "RSA", "-keysize", "2048", "-validity", CERT_DAYS]
        pem, csr_, signed_ = str(self.ca_pem), str(csr), str(signed)
        steps = [
            ("CA key", ["-genkeypair", "-alias", "ca", "-dname", CA_DN, *key, "-ext", "bc:c"], ca),
            ("CA certificate", ["-exportcert", "-rfc", "-alias", "ca", "-file", pem], ca),
            ("broker key", ["-genkeypair", "-alias", "broker", "-dname", BROKER_DN, *key], broker),
            ("broker request", ["-certreq", "-alias", "broker", "-file", csr_], broker),
            ("broker certificate", ["-gencert", "-alias", "ca", "-infile", csr_, "-rfc",
                                    "-outfile", signed_, "-validity", CERT_DAYS, "-ext", SAN,
                                    "-ext", "KU=digitalSignature,keyEncipherment",
                                    "-ext", "EKU=serverAuth,clientAuth"], ca),
            ("CA in the key store", ["-importcert", "-noprompt", "-alias", "ca", "-file", pem],
             broker),
            ("certificate in the key store", ["-importcert", "-alias", "broker", "-file", signed_],
             broker),
            ("trust store", ["-importcert", "-noprompt", "-alias", "ca", "-file", pem],
             ["-keystore", str(self.truststore), *store]),
        ]  # fmt: skip
        for what, args, where in steps:
            done = subprocess.run(
                [keytool, *args, *where], env=env, capture_output=True, text=True, timeout=120
            )
            if done.returncode != 0:
                raise SecurityError(f"keytool failed making the {what}: {last_line(done)}")
        for path in (self.ca_store, self.keystore, self.truststore):
            os.chmod(path, 0o600)
        csr.unlink()
        signed.unlink()

    # -- reading -------------------------------------------------------------------------

    def secrets(self) -> dict[str, str]:
        """The values of `secrets.env`."""
        pairs = (line.split("=", 1) for line in self.secrets_file.read_text().splitlines())
        return {name: value for name, value in pairs}

    def password(self, user: str) -> str:
        return self.secrets()[PASSWORD_VARS[user]]

    def client_settings(self, user: str, password: str | None = None) -> dict[str, Any]:
        """librdkafka settings for `user`; without `password`, the one in `secrets.env`."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": self.password(user) if password is None else password,
            "ssl.ca.location": str(self.ca_pem),
        }

    def server_settings(self, port: int, controller: int) -> dict[str, str]:
        """server.properties entries that replace the plain broker's listeners."""
        values = self.secrets()
        admin = values[PASSWORD_VARS[ADMIN_USER]]
        store = values[STORE_VAR]
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN_USER}" password="{admin}";'
        )
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
            "inter.broker.listener.name": "SASL_SSL",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            "listener.name.controller.ssl.client.auth": "required",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": store,
            "ssl.key.password": store,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.truststore),
            "ssl.truststore.password": store,
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_DN}",
        }

    def format_arguments(self) -> list[str]:
        """kafka-storage format arguments that write both users' SCRAM credentials: one
        `@file`, which the java launcher expands, so that no password shows in the process
        list (the file is 0600; `forget_format_arguments` removes it)."""
        lines = [
            line
            for user in PASSWORD_VARS
            for line in ("--add-scram", f"{MECHANISM}=[name={user},password={self.password(user)}]")
        ]
        write_private(self._format_args, "\n".join(lines) + "\n")
        return [f"@{self._format_args}"]

    def forget_format_arguments(self) -> None:
        self._format_args.unlink(missing_ok=True)

    @property
    def _format_args(self) -> Path:
        return self.dir / "format.args"

    def secret_values(self) -> list[str]:
        """Every secret of this home, for checks that none leaked."""
        return list(self.secrets().values())

    def redact(self, text: str) -> str:
        """`text` with every secret of this home replaced, for messages quoting tool output."""
        for secret in self.secret_values() if self.exists() else ():
            text = text.replace(secret, "[redacted]")
        return text

    def describe(self, bootstrap: str) -> list[str]:
        """How to connect, without a secret: printed by `logwheel broker start --secure`."""
        job, admin = self.settings_file(JOB_USER), self.settings_file(ADMIN_USER)
        return [
            f"secure broker: SASL_SSL ({MECHANISM}) on {bootstrap}, ACLs required "
            f"(allow.everyone.if.no.acl.found=false); CA certificate {self.ca_pem}",
            f"client settings for --config: {job} (user {JOB_USER!r}), {admin} (user "
            f"{ADMIN_USER!r}, super user)",
            f"their passwords: {self.secrets_file} (mode 0600); export them with "
            f"`set -a; . {self.secrets_file}; set +a`",
            f"grant the job user a pipeline's ACLs: logwheel acls MODULE:ATTR --principal "
            f"User:{JOB_USER} --create --bootstrap {bootstrap} --config {admin}",
        ]


def last_line(done: subprocess.CompletedProcess) -> str:
    """What a failed command said last (its stderr, else its stdout)."""
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else "no output"


def _settings_toml(settings: dict[str, Any]) -> str:
    """A `[kafka]` table whose password is the `${VAR}` reference of its user."""
    user = settings["sasl.username"]
    settings = {**settings, "sasl.password": f"${{{PASSWORD_VARS[user]}}}"}
    lines = [
        f"# logwheel client settings for user {user!r}; the password comes from the",
        f"# environment (see secrets.env beside this file): export {PASSWORD_VARS[user]}",
        "[kafka]",
        *(f'"{key}" = "{value}"' for key, value in settings.items()),
    ]
    return "\n".join(lines) + "\n"
