"""The Bloom generations in front of a deduplicating task's ids: within their false-positive
bound at the size they were built for, never a false negative, and forgetting by slice."""

from __future__ import annotations

from framework.core.bloom import SLICES, BloomFilter, Generations, item_hash


def test_the_false_positive_rate_on_a_million_ids_is_within_the_configured_bound():
    horizon, n, bound = 3_600_000, 1_000_000, 0.01
    bloom = Generations(horizon // SLICES, expected=n, fpr=bound)
    for i in range(n):  # a million ids spread over one horizon: every generation live
        time = i * horizon // n
        bloom.add(item_hash(f"user-{i % 5000}", f"click-{i}"), time - time % (horizon // SLICES))
    false = sum(item_hash(f"user-{i % 5000}", f"other-{i}") in bloom for i in range(n))
    rate = false / n
    print(f"measured false-positive rate {rate:.4%} (bound {bound:.0%}), {bloom.bytes} bytes")
    assert rate <= bound
    assert all(item_hash(f"user-{i % 5000}", f"click-{i}") in bloom for i in range(0, n, 997))


def test_a_filter_has_no_false_negatives():
    bloom = Generations(100, expected=4_000, fpr=0.01)
    items = [item_hash("k", str(i)) for i in range(1000)]
    for h in items:
        bloom.add(h, 0)
    assert all(h in bloom for h in items)


def test_a_filter_is_sized_for_its_rate_with_four_probes():
    bloom = BloomFilter(1_000, 0.01)  # (1 - e^(-4n/m))^4 <= 0.01 needs m >= 10,526 bits
    assert len(bloom.bits) * 8 >= 10_526 and bloom.mask == len(bloom.bits) * 8 - 1


def test_dropping_a_generation_forgets_its_ids_only():
    bloom = Generations(100, expected=400, fpr=0.01)
    old, new = item_hash("k", "old"), item_hash("k", "new")
    bloom.add(old, 50)
    bloom.add(new, 150)
    bloom.drop_before(100)
    assert old not in bloom and new in bloom


def test_a_generation_past_its_share_grows_instead_of_filling():
    bloom = Generations(100, expected=40, fpr=0.01)  # 10 ids a generation
    for i in range(1000):
        bloom.add(item_hash("k", f"id-{i}"), 5)
    false = sum(item_hash("k", f"other-{i}") in bloom for i in range(10_000))
    assert false / 10_000 <= 0.01
