"""CPU µs per record of the Confluent wire format's codecs: logwheel's (fastavro, parsed
schemas cached per id: framework/serde/confluent.py) against confluent-kafka's own
`AvroSerializer` / `AvroDeserializer`, with Avro single-object encoding for reference. All
against one in-process `mock://` registry client, whose lookups are cached after the first
record as a real registry's are. A tool, not part of `make bench` (no QUICK_ARGS):

    .venv/bin/python bench/wire_codecs.py [RECORDS]

It picked the codec: logwheel's path was 2.8x faster to encode and 5x faster to decode.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from framework.serde.catalogue import default_schemas
from framework.serde.confluent import WireFormat, registered_form


class MockSource:
    """confluent-kafka's mock registry client as the wire format's `SchemaSource`."""

    url = "mock://bench"

    def __init__(self) -> None:
        self.client = SchemaRegistryClient.new_client({"url": self.url})

    def schema(self, schema_id: int) -> str:
        return self.client.get_schema(schema_id).schema_str

    def register(self, subject: str, schema: str) -> int:
        return self.client.register_schema(subject, Schema(schema, "AVRO"))


def _cpu_us(fn: Callable[[Any], Any], items: Sequence[Any]) -> tuple[float, list[Any]]:
    began = time.process_time()
    out = [fn(v) for v in items]
    return (time.process_time() - began) / len(items) * 1e6, out


def main(argv: Sequence[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    source, schemas = MockSource(), default_schemas()
    wire = WireFormat(source, schemas)
    samples = {
        "wordcount.WordCount": [{"word": f"word{i % 5000}", "count": i} for i in range(n)],
        "zeitgeist.SearchQuery": [
            {"query": f"query {i % 5000}", "user": f"u{i % 100}", "locale": "en-US"}
            for i in range(n)
        ],
    }
    for name, values in samples.items():
        topic = name.replace(".", "-")
        ctx = SerializationContext(topic, MessageField.VALUE)
        text = registered_form(schemas[name], schemas.named)
        serialize, deserialize = (
            AvroSerializer(source.client, text),
            AvroDeserializer(source.client, text),
        )
        encode, decode = wire.encoder(topic, name), wire.decoder(topic, name)
        single_encode, single_decode = schemas.encoder_for(name), schemas.decoder_for(name)
        data = [encode(v) for v in values]
        single = [single_encode(v) for v in values]
        assert data[:100] == [serialize(v, ctx) for v in values[:100]]
        runs: list[tuple[str, Callable[[Any], Any], Sequence[Any]]] = [
            ("AvroSerializer", functools.partial(serialize, ctx=ctx), values),
            ("logwheel wire encode", encode, values),
            ("single-object encode", single_encode, values),
            ("AvroDeserializer", functools.partial(deserialize, ctx=ctx), data),
            ("logwheel wire decode", decode, data),
            ("single-object decode", single_decode, single),
        ]
        best: dict[str, float] = {}
        for _ in range(3):
            for label, fn, items in runs:
                us, out = _cpu_us(fn, items)
                best[label] = min(best.get(label, float("inf")), us)
                if "decode" in label or "Deserializer" in label:
                    assert out[:100] == values[:100], label
        print(f"{name} ({n} records, best of 3, CPU µs per record):")
        for label, us in best.items():
            print(f"  {label:24} {us:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
