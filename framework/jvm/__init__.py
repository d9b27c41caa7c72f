"""logwheel's JVM parts: the Kafka broker's jars, Spark's Kafka connector and the Schema
Registry's jar, described by the Maven poms shipped here, found, fetched or built on first use
(`jars.py`); what running them locally asks of the machine (`process.py`: Java, processes,
ports); the lifecycle of one run detached, as the embedded broker's and registry's JVMs are
(`service.py`: pid file, start, readiness, stop, kill, and which process is ours); the class
archive a JVM started often maps (`class_archive.py`); and the broker's log4j2 settings.

May import: the standard library, rich, `framework.errors`, `framework.private_files`.
"""
