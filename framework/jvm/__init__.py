"""logwheel's JVM parts: the Kafka broker's jars and Spark's Kafka connector, described by the
Maven poms shipped here, found or fetched on first use (`jars.py`), and the broker's log4j2
settings.

May import: the standard library, rich, `framework.errors`.
"""
