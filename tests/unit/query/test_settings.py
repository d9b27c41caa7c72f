"""`--serve [HOST:]PORT` and the `[serve]` table: loopback unless a host is given, and every
mistake one line naming the fix."""

from __future__ import annotations

import pytest

from framework.errors import ConfigurationError
from framework.query.settings import ServeSettings, advertised, parse_serve, serve_settings


def test_serve_binds_loopback_unless_a_host_is_given():
    assert parse_serve("8080") == ("127.0.0.1", 8080)
    assert parse_serve("0") == ("127.0.0.1", 0)
    assert parse_serve("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_serve("[::1]:9000") == ("::1", 9000)
    assert parse_serve("[0.0.0.0]:8701") == ("0.0.0.0", 8701)  # as the supervisor passes it
    for bad in ("", "x", "host:", "70000", "-1"):
        with pytest.raises(ConfigurationError, match=r"\[HOST:\]PORT"):
            parse_serve(bad)


def test_the_advertised_url_names_the_bound_host_or_what_advertise_says(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "node-7")
    assert advertised(ServeSettings(), "127.0.0.1", 81) == "http://127.0.0.1:81"
    assert advertised(ServeSettings(), "0.0.0.0", 81) == "http://node-7:81"
    assert advertised(ServeSettings(advertise="pod-1.job"), "0.0.0.0", 81) == "http://pod-1.job:81"
    assert advertised(ServeSettings(advertise="lb:443"), "::", 81) == "http://lb:443"
    assert advertised(ServeSettings(), "::1", 81) == "http://[::1]:81"


def test_serve_settings_are_checked_at_start(tmp_path, monkeypatch):
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    monkeypatch.setenv("QUERY_TOKEN", "s3cret-s3cret-s3cret")
    settings = serve_settings(
        {"certfile": str(cert), "keyfile": str(cert), "token": "${QUERY_TOKEN}"}, "[serve]"
    )
    assert settings.scheme == "https"
    assert settings.headers() == {"Authorization": "Bearer s3cret-s3cret-s3cret"}
    for table, fix in [
        ({"tokn": "x"}, "unknown setting"),
        ({"certfile": str(cert)}, "certfile and keyfile together"),
        ({"certfile": str(tmp_path / "no"), "keyfile": str(cert)}, "cannot be read"),
        ({"token": "short"}, "16 characters"),
        ({"token": "${NOT_SET_ANYWHERE}"}, "export NOT_SET_ANYWHERE"),
        ({"token": 5}, "must be a string"),
    ]:
        with pytest.raises(ConfigurationError, match=fix):
            serve_settings(table, "[serve]")
