"""The schema catalogue (serde/catalogue.py): loading logwheel's own types and a job's from the
search path, fingerprints, codecs cached per name, writer schemas resolved to the reader's
(earlier versions too), each writer schema vetted once, and JSON for a stream without one."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from framework.serde import catalogue
from framework.serde.avro_codec import HEADER_SIZE, MARKER
from framework.serde.catalogue import (
    Schemas,
    decoder_for,
    default_schemas,
    encoder_for,
    load_schemas,
)
from framework.serde.codecs import DecodeError
from framework.serde.json_codec import decode_json, encode_json
from framework.serde.schemas import (
    SCHEMAS_ENV,
    SchemaError,
    canonical_form,
    fingerprint_of,
    search_path,
)
from tests.unit.serde.test_schemas import rabin

REPO_SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"

SAMPLES = {
    "logwheel.Watermark": {
        "producer": "by-key/words/1",
        "watermark": 1_700_000_000_000,
        "idle": False,
        "input_watermark": 1_700_000_000_500,
        "read": 1234,
        "percentile_late": 5,
        "offsets": [{"topic": "words", "partition": 3, "offset": 17}],
        "generation": 2,
        "sequence": 9,
    },
    "logwheel.TimerEntry": {"key": "k", "tag": "close", "time": 60_000, "domain": "processing"},
    "zeitgeist.SearchQuery": {"query": "kafka", "user": "u1", "locale": None},
    "zeitgeist.WindowResult": {"key": "kafka", "start": 0, "end": 60_000, "value": 3},
    "zeitgeist.Anomaly": {
        "query": "kafka",
        "window_start": 0,
        "kind": "spike",
        "observed": 90,
        "expected": 12.5,
    },
    "zeitgeist.Model": {"query": "kafka", "window_start": 0, "expected": 12.5, "count": 90},
    "wordcount.WordCount": {"word": "the", "count": 7},
}


def write(directory: Path, name: str, schema: dict) -> None:
    (directory / f"{name}.avsc").write_text(json.dumps(schema))


@pytest.fixture
def repo() -> Schemas:
    return load_schemas(REPO_SCHEMAS)


# -- fingerprints ---------------------------------------------------------------------------


def test_every_repo_schema_fingerprint_agrees_with_the_oracle(repo):
    for name, canonical in repo.canonical.items():
        assert repo.fingerprints[name] == rabin(canonical.encode()).to_bytes(8, "little"), name


def test_types_from_other_files_are_inlined_at_first_use(tmp_path):
    b = {"type": "record", "name": "B", "namespace": "x", "fields": [{"name": "v", "type": "int"}]}
    a = {
        "type": "record",
        "name": "x.A",
        "fields": [{"name": "b", "type": "x.B"}, {"name": "again", "type": "x.B"}],
    }
    write(tmp_path, "x.A", a)  # sorts first: loading must retry it after x.B
    write(tmp_path, "x.B", b)
    schemas = load_schemas(tmp_path)
    inline = {**a, "fields": [{"name": "b", "type": b}, {"name": "again", "type": "x.B"}]}
    assert schemas.canonical["x.A"] == canonical_form(parse_schema(inline), {})
    assert '"again","type":"x.B"' in schemas.canonical["x.A"]
    value = {"b": {"v": 1}, "again": {"v": 2}}
    assert schemas.decoder_for("x.A")(schemas.encoder_for("x.A")(value)) == value


# -- loading --------------------------------------------------------------------------------


def test_the_search_path_is_the_env_else_here_else_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(SCHEMAS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert search_path() == [REPO_SCHEMAS]  # run from elsewhere, in a checkout
    assert set(load_schemas()) >= set(SAMPLES) | {"logwheel.Watermark"}
    (tmp_path / "schemas").mkdir()
    assert search_path() == [tmp_path / "schemas"]
    monkeypatch.setenv(SCHEMAS_ENV, f"{tmp_path}/a:{tmp_path}/b")
    assert search_path() == [tmp_path / "a", tmp_path / "b"]


def test_logwheels_own_types_come_with_the_package_whatever_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv(SCHEMAS_ENV, str(tmp_path))
    own = load_schemas()
    assert {"logwheel.Watermark", "logwheel.TimerEntry"} <= set(own)
    assert own.history["logwheel.Watermark"][0][0] == 1


def test_env_points_elsewhere(tmp_path, monkeypatch):
    write(tmp_path, "x.Only", {"type": "record", "name": "x.Only", "fields": []})
    monkeypatch.setenv(SCHEMAS_ENV, str(tmp_path))
    default_schemas.cache_clear()
    try:
        assert {n for n in default_schemas() if not n.startswith("logwheel.")} == {"x.Only"}
        with pytest.raises(SchemaError) as missing:
            encoder_for("zeitgeist.SearchQuery")
        assert f"zeitgeist.SearchQuery.avsc defining it; searched {tmp_path}" in str(missing.value)
    finally:
        default_schemas.cache_clear()


def test_a_type_in_two_directories_of_the_path_names_both(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        write(tmp_path / d, "x.Twice", {"type": "record", "name": "x.Twice", "fields": []})
    with pytest.raises(SchemaError, match=r"x\.Twice\.avsc is in both .*/a and .*/b"):
        load_schemas(tmp_path / "a", tmp_path / "b")


def test_a_job_cannot_redefine_logwheels_own_types(tmp_path):
    write(
        tmp_path,
        "logwheel.Watermark",
        {"type": "record", "name": "logwheel.Watermark", "fields": []},
    )
    with pytest.raises(SchemaError, match="logwheel.Watermark.avsc is in both"):
        load_schemas(tmp_path)


def test_missing_directory_names_the_env_variable(tmp_path):
    with pytest.raises(SchemaError, match="LOGWHEEL_SCHEMAS"):
        load_schemas(tmp_path / "nope")


def test_unknown_schema_name_names_the_missing_file():
    with pytest.raises(SchemaError, match=r"zeitgeist\.Nope\.avsc.*searched \S*schemas"):
        encoder_for("zeitgeist.Nope")
    with pytest.raises(SchemaError, match=r"zeitgeist\.Nope\.avsc.*LOGWHEEL_SCHEMAS"):
        decoder_for("zeitgeist.Nope")


def test_file_must_be_named_for_its_type(tmp_path):
    write(tmp_path, "x.Wrong", {"type": "record", "name": "x.Right", "fields": []})
    with pytest.raises(SchemaError, match=r"x\.Wrong\.avsc defines x\.Right"):
        load_schemas(tmp_path)


def test_reference_to_undefined_type_names_the_file_to_add(tmp_path):
    write(
        tmp_path, "x.A", {"type": "record", "name": "x.A", "fields": [{"name": "b", "type": "x.B"}]}
    )
    with pytest.raises(SchemaError, match=r"uses type 'x\.B'.*add \S+/x\.B\.avsc"):
        load_schemas(tmp_path)


def test_invalid_json_and_invalid_schema_fail_at_load(tmp_path):
    (tmp_path / "x.A.avsc").write_text("{not json")
    with pytest.raises(SchemaError, match="x.A.avsc is not a JSON schema"):
        load_schemas(tmp_path)
    write(
        tmp_path,
        "x.A",
        {"type": "record", "name": "x.A", "fields": [{"name": "f", "type": "nope"}]},
    )
    with pytest.raises(SchemaError, match="x.A.avsc"):
        load_schemas(tmp_path)


def test_a_type_defined_twice_fails_at_load(tmp_path):
    b = {"type": "record", "name": "x.B", "fields": []}
    write(tmp_path, "x.B", b)
    write(tmp_path, "x.C", {"type": "record", "name": "x.C", "fields": [{"name": "b", "type": b}]})
    with pytest.raises(SchemaError, match=r"x\.C\.avsc defines x\.B again"):
        load_schemas(tmp_path)


# -- codecs by name ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_repo_schema_round_trips(repo, name):
    data = repo.encoder_for(name)(SAMPLES[name])
    assert repo.decoder_for(name)(data) == SAMPLES[name]
    assert repo.decode_any(data) == SAMPLES[name]


def test_codecs_are_cached_per_name(repo):
    assert repo.encoder_for("wordcount.WordCount") is repo.encoder_for("wordcount.WordCount")
    assert repo.decoder_for("wordcount.WordCount") is repo.decoder_for("wordcount.WordCount")
    assert encoder_for("wordcount.WordCount") is encoder_for("wordcount.WordCount")


def test_writer_schema_resolves_to_the_reader_schema(tmp_path):
    old = {"type": "record", "name": "x.V1", "fields": [{"name": "a", "type": "int"}]}
    new = {
        "type": "record",
        "name": "x.V2",
        "aliases": ["x.V1"],
        "fields": [
            {"name": "a", "type": "long"},
            {"name": "b", "type": "string", "default": "none"},
        ],
    }
    write(tmp_path, "x.V1", old)
    write(tmp_path, "x.V2", new)
    schemas = load_schemas(tmp_path)
    data = schemas.encoder_for("x.V1")({"a": 5})
    assert schemas.decoder_for("x.V2")(data) == {"a": 5, "b": "none"}


def test_incompatible_writer_is_a_decode_error(repo):
    data = repo.encoder_for("wordcount.WordCount")({"word": "w", "count": 1})
    with pytest.raises(DecodeError, match="cannot read wordcount.WordCount as zeitgeist.Model"):
        repo.decoder_for("zeitgeist.Model")(data)


def test_a_writer_schema_with_items_that_take_no_bytes_is_refused_once_for_all_its_values(
    tmp_path, monkeypatch
):
    bag = {
        "type": "record",
        "name": "x.Bag",
        "fields": [{"name": "nothings", "type": {"type": "array", "items": "null"}}],
    }
    write(tmp_path, "x.Bag", bag)
    vetted = []
    real = catalogue.bound
    monkeypatch.setattr(catalogue, "bound", lambda *a: vetted.append(a[2]) or real(*a))
    schemas = load_schemas(tmp_path)
    decode, header = schemas.decoder_for("x.Bag"), schemas.header("x.Bag")
    for count in (b"\x80\x80\x80\x80\x80\x80\x01", b"\x02"):  # 2**41 nulls, one null
        with pytest.raises(DecodeError, match="writer schema x.Bag refused: its array items"):
            decode(header + count + b"\x00")
    assert schemas.decoder_for("x.Bag") is decode
    assert vetted.count("writer schema x.Bag") == 1


def test_decode_any_reads_json_and_avro(repo):
    assert repo.decode_any(b'{"a":1}') == {"a": 1}
    data = repo.encoder_for("zeitgeist.Model")(SAMPLES["zeitgeist.Model"])
    assert repo.decode_any(data) == SAMPLES["zeitgeist.Model"]


def test_a_value_written_with_an_earlier_version_decodes_as_the_current_one(tmp_path):
    v1 = {"type": "record", "name": "x.V", "fields": [{"name": "a", "type": "int"}]}
    current = {
        "type": "record",
        "name": "x.V",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "-"}],
    }
    write(tmp_path, "x.V", current)
    (tmp_path / "history").mkdir()
    write(tmp_path / "history", "x.V.v1", v1)
    schemas = load_schemas(tmp_path)
    old = parse_schema(v1)
    body = io.BytesIO()
    schemaless_writer(body, old, {"a": 5})
    data = MARKER + fingerprint_of(canonical_form(old, {})) + body.getvalue()
    assert data[:HEADER_SIZE] != schemas.header("x.V")  # another writer schema
    assert schemas.name_of(data[2:HEADER_SIZE]) == "x.V"
    assert schemas.decoder_for("x.V")(data) == {"a": 5, "b": "-"}
    assert schemas.decode_any(data) == {"a": 5, "b": "-"}


def test_a_stream_without_a_schema_gets_json(repo):
    assert encoder_for(None) is encode_json and decoder_for(None) is decode_json
    assert repo.encoder_for(None) is encode_json and repo.decoder_for(None) is decode_json
    with pytest.raises(DecodeError, match="where a JSON value was expected"):
        repo.decode_any(None)
