"""Word count, Samza's SplitWords -> CountWords (Figure 2 of the Kafka/Samza paper).

`lines` is written from outside (any key, value {"line": "..."}); SplitWords emits one record
per word keyed by the word; CountWords keeps a count per word and emits every update, so
`word-counts` holds, per word, exactly the counts 1, 2, ..., n.
"""

from __future__ import annotations

from framework import Computation, Pipeline


class SplitWords(Computation):
    def __init__(self, words: str = "words") -> None:
        self.words = words

    def process_record(self, ctx, record):
        for word in record.value["line"].split():
            ctx.produce(self.words, {"word": word}, key=word)


class CountWords(Computation):
    def __init__(self, counts: str = "word-counts") -> None:
        self.counts = counts

    def process_record(self, ctx, record):
        count = ctx.state.get("count", 0) + 1
        ctx.state["count"] = count
        ctx.produce(self.counts, {"word": ctx.key, "count": count})


def build(name: str = "wordcount", prefix: str = "", guarantee: str = "exactly_once") -> Pipeline:
    """The wordcount pipeline; tests and benchmarks build it with a name and stream prefix of
    their own, since streams are named globally."""
    lines, words, counts = f"{prefix}lines", f"{prefix}words", f"{prefix}word-counts"
    pipeline = Pipeline(name)
    pipeline.source(lines)
    pipeline.computation(
        "split-words",
        lambda: SplitWords(words),
        inputs={lines: None},
        outputs={words: None},
        guarantee=guarantee,
    )
    pipeline.computation(
        "count-words",
        lambda: CountWords(counts),
        inputs={words: None},
        outputs={counts: "wordcount.WordCount"},
        guarantee=guarantee,
    )
    return pipeline


pipeline = build()
