"""`dataclean.quarantine.match` on its own: which entry a row matches (id, then text hash, then a
near-duplicate of a listed text), and the weight rule every consumer shares."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.ids import table_text_hashes, text_hash
from dataclean.quarantine.lists import make_list
from dataclean.quarantine.match import DOWNWEIGHT, DROP, QuarantineIndex, lowered_weights, row_weights

# Real prose (the opening of a public-domain novel, Project Gutenberg), long enough for word 5-grams.
LISTED = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age "
    "of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season "
    "of Light, it was the season of Darkness, it was the spring of hope, it was the winter of despair, "
    "we had everything before us, we had nothing before us, we were all going direct to Heaven, we "
    "were all going direct the other way"
)
OTHER = (
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my "
    "purse, and nothing particular to interest me on shore, I thought I would sail about a little and "
    "see the watery part of the world."
)


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _jaccard(a: str, b: str) -> float:
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y)


def _index() -> QuarantineIndex:
    entries = make_list(
        [
            {C.SAMPLE_ID: "bad", C.TEXT_HASH: text_hash(LISTED), C.TEXT: LISTED, C.REASON: "loss_spike"},
            {C.SAMPLE_ID: "meh", C.ACTION: DOWNWEIGHT, C.WEIGHT: 0.25, C.REASON: "persistent_outlier"},
        ]
    )
    return QuarantineIndex.from_list(entries)


def test_a_row_matches_by_id_then_by_text_hash_then_as_a_near_duplicate() -> None:
    near = LISTED.replace("age of wisdom", "age of reason")
    assert _jaccard(near, LISTED) > 0.85 and _jaccard(OTHER, LISTED) == 0.0  # plain sets, not the index
    ids = ["bad", "renamed", "edited", "meh", "clean"]
    texts = [LISTED, LISTED, near, OTHER, OTHER]
    matches = _index().match(ids, [text_hash(t) for t in texts], texts)
    found = [(m.entry, m.reason, m.action, m.weight) if m else None for m in matches]
    assert found == [
        ("bad", "loss_spike", DROP, 0.0),
        ("bad", "loss_spike", DROP, 0.0),  # another id, the same text: by its hash
        ("bad", "near_duplicate_of:bad", DROP, 0.0),
        ("meh", "persistent_outlier", DOWNWEIGHT, 0.25),
        None,
    ]


def test_without_texts_or_with_near_duplicates_off_only_ids_and_hashes_match() -> None:
    near = LISTED.replace("age of wisdom", "age of reason")
    index = _index()
    assert index.match(["edited"], [text_hash(near)]) == [None]
    off = QuarantineIndex(index.entries, near_duplicates=False, texts=dict(index.texts))
    assert off.match(["edited"], [text_hash(near)], [near]) == [None]


def test_the_weight_rule_lowers_to_the_lower_weight_and_applying_twice_changes_nothing() -> None:
    table = pa.table({C.ID: ["bad", "meh", "clean", "low"], C.WEIGHT: [1.0, 0.5, None, 0.1]})
    weights = row_weights(table)
    assert weights.tolist() == [1.0, 0.5, C.DEFAULT_WEIGHT, 0.1]
    matches = _index().match(table.column(C.ID).to_pylist(), None)
    once = lowered_weights(weights.copy(), matches)
    twice = lowered_weights(once.copy(), matches)
    # "bad" is dropped, not down-weighted: its weight is the pipeline's to ignore, not lowered here.
    assert once.tolist() == [1.0, 0.25, 1.0, 0.1] and np.array_equal(once, twice)
    assert row_weights(pa.table({C.ID: ["a", "b"]})).tolist() == [1.0, 1.0]


def test_a_row_keeps_its_text_hash_and_gets_one_where_it_has_none() -> None:
    table = pa.table({C.TEXT: [LISTED, OTHER], C.TEXT_HASH: ["given", None]})
    assert table_text_hashes(table).to_pylist() == ["given", text_hash(OTHER)]
    assert table_text_hashes(table.drop_columns([C.TEXT_HASH])).to_pylist() == [
        text_hash(LISTED),
        text_hash(OTHER),
    ]
