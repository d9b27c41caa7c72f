"""The embedded Schema Registry: a real one (Apicurio Registry, its Confluent-compatible API),
run as a local Java process for development and tests, its schemas kept on disk so that ids
survive restarts.

`settings.py` says how it is run (pure), `readiness.py` when it answers, `embedded.py` starts
and stops it through the lifecycle every detached JVM shares (`framework.jvm.service`). The
jar is built once by `framework.jvm.jars` (`registry_jar`).

May import: `framework.kafka`, `framework.jvm`, `framework.errors`, `framework.private_files`.
"""
