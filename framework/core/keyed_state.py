"""Write-back cache of per-key state documents (MillWheel §8.3), in front of a backend that
holds the committed, encoded documents (RocksDB for a Kafka task, a dict for the Harness).

A document is encoded once per hook call that touched it (`seal`), before the call counts as
done: a document that cannot be serialized (not JSON-compatible, not fitting the state schema,
larger than the changelog accepts) fails its hook call, which is then undone and dead-lettered
like any failing hook, instead of failing the commit later where no record is to blame
(invariant 7). The sealed bytes are what the changelog gets, so a commit encodes nothing, and
they are what a failed call rolls back to.

A computation that vouches for its documents (`vouches_state`: it checks each piece it adds to
a document, and a call of it that fails has changed nothing) has them *deferred* instead
(`defer`): marked dirty, encoded once at the next `changes()`, not once per call. A document
of n entries then costs O(n) per commit rather than per record (the interval join: a busy
key holds many open records). Its size is bounded by an estimate (last encoded size plus what
each call said it added, `fits`); near the changelog's limit the computation seals as above.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from framework.errors import BadRecord


class StateBackend(Protocol):
    def load(self, key: str) -> bytes | None:
        """The committed, encoded document of `key`; None if it has none."""


class KeyedState:
    """Live documents of recently used keys, and the encoded form of each.

    `get` hands out the live dict of a key; `seal` encodes it after a successful hook call;
    `rollback` puts back the last sealed form after a failed one. The driver takes
    `changes()` — (key, encoded or None to delete) for keys whose sealed form differs from the
    committed one — makes them durable, then calls `committed()`. Clean documents of the least
    recently used keys are evicted past `capacity` (at each commit, and between commits once it
    is exceeded by an eighth); a dirty one never is. An eviction that meets a dirty document
    sets it aside until the commit, so the next one does not walk past it again (with every
    record a new key, a second's dirty documents would otherwise cost a scan per record).
    """

    def __init__(
        self,
        backend: StateBackend,
        encode: Callable[[Any], bytes],
        decode: Callable[[bytes], Any],
        *,
        capacity: int = 10_000,
        max_bytes: int | None = None,
        encode_vetted: Callable[[Any], bytes] | None = None,
    ) -> None:
        self._backend = backend
        self._encode = encode
        # of deferred documents, whose every piece its computation checked with `encode`
        self._encode_vetted = encode if encode_vetted is None else encode_vetted
        self._decode = decode
        self.capacity = capacity
        self._slack = max(1, capacity // 8)
        self.max_bytes = max_bytes
        self._cache: OrderedDict[str, dict] = OrderedDict()  # least recently used first
        self._aside: dict[str, dict] = {}  # dirty documents an eviction met
        self._sealed: dict[str, bytes | None] = {}  # encoded form of each cached document
        self._base: dict[str, bytes | None] = {}  # committed form of keys sealed since
        self._reported: dict[str, bytes | None] = {}  # by the last changes(), not yet committed
        self._deferred: dict[str, int] = {}  # dirty, not encoded since: bytes added since

    def get(self, key: str) -> dict:
        """The live document of `key` ({} if it has none)."""
        cache = self._cache
        doc = cache.get(key)
        if doc is None:
            doc = self._aside.pop(key, None)
            if doc is None:
                return self._load(key)
            cache[key] = doc
            return doc
        cache.move_to_end(key)
        return doc

    def peek(self, key: str) -> dict | None:
        """The current document of `key` without filling the cache."""
        doc = self._cache.get(key)
        if doc is None:
            doc = self._aside.get(key)
        if doc is None:
            raw = self._backend.load(key)
            doc = None if raw is None else self._decode(raw)
        return doc or None

    def seal(self, key: str, doc: dict) -> None:
        """A hook call that touched `key` (whose live document is `doc`) returned: encode the
        document, or raise BadRecord (stage "state") if it cannot be stored."""
        if doc:
            try:
                raw = self._encode(doc)
            except Exception as error:
                raise BadRecord(
                    "state",
                    f"state of key {key!r} cannot be stored ({error}): keep str keys and "
                    "JSON-compatible values in ctx.state, or values fitting its state_schema",
                    error,
                ) from error
            if self.max_bytes is not None and len(raw) + len(key) > self.max_bytes:
                raise BadRecord(
                    "state",
                    f"state of key {key!r} is {len(raw)} bytes encoded, over the changelog's "
                    f"limit of {self.max_bytes} bytes: keep less per key (or raise the "
                    "changelog topic's max.message.bytes)",
                )
        else:
            raw = None
        self._deferred.pop(key, None)
        before = self._sealed.get(key)
        if raw != before:
            if key not in self._base:
                self._base[key] = before
            self._sealed[key] = raw

    def defer(self, key: str, added: int = 0) -> None:
        """A hook call of a computation that vouches for its documents touched `key` and
        returned, having added about `added` encoded bytes (an upper bound; removals count
        nothing): the document is dirty, and is encoded at the next `changes()`."""
        if key not in self._base:
            self._base[key] = self._sealed.get(key)
        self._deferred[key] = self._deferred.get(key, 0) + added

    def fits(self, key: str, added: int) -> bool:
        """Whether `key`'s document surely stays within the changelog's limit with `added`
        more encoded bytes (by its estimate: False may be wrong, True is not)."""
        if self.max_bytes is None:
            return True
        raw = self._sealed.get(key)
        size = 0 if raw is None else len(raw)
        return size + self._deferred.get(key, 0) + added + len(key) + 2 <= self.max_bytes

    def rollback(self, key: str) -> None:
        """A hook call that touched `key` failed: its document is again the last sealed one
        (a deferred one stays as it is: its computation changes nothing in a call that
        fails)."""
        if key in self._deferred:
            return
        raw = self._sealed.get(key)
        self._aside.pop(key, None)
        self._cache[key] = {} if raw is None else self._decode(raw)

    def changes(self) -> list[tuple[str, bytes | None]]:
        """(key, encoded document or None for empty) for every key whose sealed form differs
        from the committed one."""
        sealed, out = self._sealed, []
        if self._deferred:
            self._encode_deferred()
        for key, base in self._base.items():
            now = sealed[key]
            self._reported[key] = now
            if now != base:
                out.append((key, now))
        return out

    def committed(self) -> None:
        """What the last `changes()` returned is durable; keys sealed or deferred since stay
        dirty."""
        sealed, base, deferred = self._sealed, self._base, self._deferred
        for key, value in self._reported.items():
            if sealed.get(key) == value and key not in deferred:
                base.pop(key, None)
            else:
                base[key] = value
        self._reported = {}
        cache, aside = self._cache, self._aside
        for key in reversed([key for key in aside if key not in base]):
            cache[key] = aside.pop(key)  # back where it was: older than anything cached
            cache.move_to_end(key, last=False)
        self._shrink(self.capacity)

    def _encode_deferred(self) -> None:
        """Encode every deferred document (its computation vetted each piece: an error here is
        a bug of that computation, not a record's)."""
        cache, aside, sealed, encode = self._cache, self._aside, self._sealed, self._encode_vetted
        for key in self._deferred:
            doc = cache.get(key)
            if doc is None:
                doc = aside[key]
            sealed[key] = encode(doc) if doc else None
        self._deferred = {}

    def evict_clean(self) -> None:
        """Forget every clean document, so the next `get` reloads it from the backend."""
        self._shrink(0)

    def __len__(self) -> int:
        return len(self._cache) + len(self._aside)

    def _load(self, key: str) -> dict:
        raw = self._backend.load(key)
        doc = {} if raw is None else self._decode(raw)
        if not isinstance(doc, dict):
            raise TypeError(f"state of key {key!r} decoded to {type(doc).__name__}, not a dict")
        # Before the insert (never evict `key` itself), and in batches of an eighth of the
        # capacity: with every record a new key, evicting one per load cost a scan per record.
        if len(self._cache) >= self.capacity + self._slack:
            self._shrink(self.capacity - 1)
        self._cache[key] = doc
        self._sealed[key] = raw
        return doc

    def _shrink(self, size: int) -> None:
        """Least recently used first, until `size` documents are cached: clean ones are
        forgotten, dirty ones set aside."""
        cache, dirty, aside, sealed = self._cache, self._base, self._aside, self._sealed
        while len(cache) > size:
            key, doc = cache.popitem(last=False)
            if key in dirty:
                aside[key] = doc
            else:
                del sealed[key]


class MemoryStateBackend:
    """Committed state documents, encoded as the changelog carries them."""

    def __init__(self) -> None:
        self.docs: dict[str, bytes] = {}

    def load(self, key: str) -> bytes | None:
        return self.docs.get(key)

    def apply(self, changes: Iterable[tuple[str, bytes | None]]) -> None:
        for key, raw in changes:
            if raw is None:
                self.docs.pop(key, None)
            else:
                self.docs[key] = raw
