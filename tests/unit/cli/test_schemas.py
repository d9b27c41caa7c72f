"""`logwheel schemas dump`: logwheel's own record types, as other tools need them to decode
marks and timer journal entries; they decode what logwheel writes."""

from __future__ import annotations

import json
from io import BytesIO

from fastavro import parse_schema, schemaless_reader

from framework.cli.main import main
from framework.core.api import Timer
from framework.core.timers import encode_timer
from framework.serde.avro_codec import HEADER_SIZE


def test_dump_prints_every_own_type_and_one_by_name(capsys):
    assert main(["schemas", "dump"]) == 0
    assert '"name": "Watermark"' in capsys.readouterr().out
    assert main(["schemas", "dump", "logwheel.TimerEntry"]) == 0
    schema = json.loads(capsys.readouterr().out)
    raw = encode_timer("k", "close", Timer(5, "close", "event"))
    entry = schemaless_reader(BytesIO(raw[HEADER_SIZE:]), parse_schema(schema), None)
    assert entry == {"key": "k", "tag": "close", "time": 5, "domain": "event"}


def test_dump_of_an_unknown_type_names_the_ones_there_are(capsys):
    assert main(["schemas", "dump", "logwheel.Nope"]) == 1
    assert (
        "it has logwheel.SeenIds, logwheel.ServingAddress, logwheel.TimerEntry, logwheel.Watermark"
        in capsys.readouterr().err
    )
