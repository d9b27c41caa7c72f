"""Values on the wire: UTF-8 JSON and Avro single-object encoding, schema lookup (the
package's own `logwheel.*` types and a job's `.avsc` directories), schema compatibility.

May import: the standard library, fastavro, orjson, `framework.errors`.
"""
