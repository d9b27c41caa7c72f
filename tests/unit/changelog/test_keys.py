"""`changelog dump` shows every key: UTF-8 as text, other bytes escaped, never a crash."""

from __future__ import annotations

from changelog import key_text


def test_a_non_utf8_key_is_shown_escaped():
    assert key_text(b"caf\xc3\xa9") == "café"
    assert key_text(b"\xff\xfeid") == "\\xff\\xfeid"
    assert key_text(None) == ""
