"""What `changelog.spark.read_snapshot` makes of a value, without Spark: a value of either
encoding logwheel writes (Avro by its fingerprint, or JSON) becomes JSON text with its fields
sorted, so equal states compare equal as text. Reading a topic through Spark runs in
tests/integration/test_changelog_spark.py."""

from __future__ import annotations

import json

from changelog.spark import _to_json
from framework.serde.catalogue import encoder_for
from framework.serde.json_codec import encode_json

ADDRESS = {"url": "http://h:1", "instance": "i-0", "standby": 1, "keyed_topic": "t",
           "partitions": 2, "started_at": 5}  # fmt: skip


def test_an_avro_value_and_a_json_one_become_the_same_sorted_json_text():
    avro = _to_json(None, "p.c.changelog", encoder_for("logwheel.ServingAddress")(ADDRESS))
    assert avro == json.dumps(dict(sorted(ADDRESS.items())))
    assert _to_json(None, "p.c.changelog", encode_json(ADDRESS)) == avro
    assert _to_json(None, "p.c.changelog", bytearray(b'{"b": [2], "a": null}')) == (
        '{"a": null, "b": [2]}'  # Spark hands a binary column over as a bytearray
    )
