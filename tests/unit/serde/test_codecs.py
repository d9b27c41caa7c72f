"""The codecs' errors (serde/codecs.py): bad records at the stage the dead letter names."""

from __future__ import annotations

import pytest

from framework.errors import BadRecord
from framework.serde.codecs import DecodeError, EncodeError


@pytest.mark.parametrize(("error", "stage"), [(EncodeError, "encode"), (DecodeError, "decode")])
def test_a_codec_error_is_a_bad_record_at_its_stage_with_the_reason_as_message(error, stage):
    raised = error("value does not fit schema x.A: a is missing")
    assert isinstance(raised, BadRecord)
    assert raised.stage == stage and raised.cause is None
    assert str(raised) == "value does not fit schema x.A: a is missing"
