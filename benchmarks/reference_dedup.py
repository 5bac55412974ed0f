"""The one truth both dedup tools are scored against, written apart from dataclean's code.

Nothing here imports dataclean or a dedup library: the shingles, the pairs and the scores come
from the Python standard library, numpy and `regex` (for Unicode's punctuation class) only, so
the truth is neither tool's own view.

Normalization (simple and documented, the same for every document): Unicode NFKC, lowercase,
every punctuation character (Unicode category P*) becomes a space. Tokens: the whitespace-split
words, or, for a document whose `lang` is "zh" (the corpus's own label), its characters with
whitespace removed. Shingles: every run of 5 consecutive tokens (words joined by one space,
characters joined as they are); a document with fewer than 5 tokens has one shingle, all its
tokens; one without tokens has none and is similar to nothing. A shingle is stored as Python's
`hash()` of its string (64-bit, one process: a collision between two different shingles of the
same corpus has probability about pairs / 2**64, nil here).

Pairs: every pair with exact Jaccard(shingle sets) >= threshold, found exactly (no sampling, no
MinHash) by prefix filtering (Chaudhuri, Ganti, Kaushik 2006; Bayardo, Ma, Srikant 2007): order
all shingles by corpus frequency, rarest first; two sets x, y with J(x, y) >= t share a shingle
among the first |x| - ceil(t |x|) + 1 of x's and of y's. Every pair that shares such a shingle
(and passes the size bound t |x| <= |y| <= |x| / t) is a candidate, and each candidate's
Jaccard is computed exactly on the two sets.

Scores (`score`), the same meaning for every tool, given the rows it kept and the rows its dedup
dropped (rows that never reached its dedup are in neither):
- pairs_left: pairs with J >= t whose rows were both kept (a duplicate left in the output);
- false_drops: dropped rows that have no kept row at J >= t (nothing left stands for them).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import regex

NGRAM = 5
NORMALIZATION = (
    "NFKC, lowercase, punctuation (Unicode P*) to spaces; words split on whitespace, Chinese "
    "(lang zh) by characters; 5-token shingles"
)


PUNCTUATION = regex.compile(r"\p{P}")  # Unicode category P*, as the `regex` package defines it


def tokens(text: str, lang: str) -> list[str]:
    """The document's tokens after the module's normalization."""
    folded = PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", text).lower())
    if lang == "zh":
        return [character for character in folded if not character.isspace()]
    return folded.split()


def shingle_set(text: str, lang: str) -> set[str]:
    """The document's shingles as strings (the plain definition; `shingle_hashes` hashes them)."""
    found = tokens(text, lang)
    glue = "" if lang == "zh" else " "
    if not found:
        return set()
    if len(found) < NGRAM:
        return {glue.join(found)}
    return {glue.join(found[i : i + NGRAM]) for i in range(len(found) - NGRAM + 1)}


def shingle_hashes(text: str, lang: str) -> np.ndarray:
    """Sorted unique 64-bit hashes of the document's shingles."""
    return np.unique(np.fromiter((hash(s) for s in shingle_set(text, lang)), dtype=np.int64))


def _jaccard(first: np.ndarray, second: np.ndarray) -> float:
    common = len(np.intersect1d(first, second, assume_unique=True))
    return common / (len(first) + len(second) - common)


def similar_pairs(
    texts: Sequence[str], langs: Sequence[str], threshold: float
) -> dict[tuple[int, int], float]:
    """Every pair of row numbers (i < j) whose shingle sets have Jaccard >= threshold."""
    sets = [shingle_hashes(text, lang) for text, lang in zip(texts, langs, strict=True)]
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    values = np.concatenate([s for s in sets if len(s)]) if sizes.any() else np.empty(0, np.int64)
    rows = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)
    distinct, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[np.lexsort((distinct, counts))] = np.arange(len(distinct))  # rarest first, ties by value
    token = rank[inverse]
    order = np.lexsort((token, rows))  # each row's shingles, rarest first
    token, rows = token[order], rows[order]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    position = np.arange(len(rows)) - starts[rows]
    prefix = sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1
    chosen = position < prefix[rows]
    token, rows = token[chosen], rows[chosen]
    by_token = np.lexsort((rows, token))
    token, rows = token[by_token], rows[by_token]
    bounds = np.flatnonzero(np.r_[True, token[1:] != token[:-1], True])
    count = np.int64(len(sets))
    group_starts, group_sizes = bounds[:-1], np.diff(bounds)
    pairs_of_two = group_starts[group_sizes == 2]  # most groups: two rows, already a < b
    codes = [rows[pairs_of_two] * count + rows[pairs_of_two + 1]]
    for start, size in zip(group_starts[group_sizes > 2], group_sizes[group_sizes > 2], strict=True):
        members = rows[start : start + size]
        first, second = np.triu_indices(size, k=1)
        codes.append(members[first] * count + members[second])
    candidates = np.unique(np.concatenate(codes))
    left, right = candidates // count, candidates % count
    small, large = np.minimum(sizes[left], sizes[right]), np.maximum(sizes[left], sizes[right])
    keep = small >= threshold * large - 1e-9  # a pair over the threshold has sizes within t
    pairs: dict[tuple[int, int], float] = {}
    for a, b in zip(left[keep].tolist(), right[keep].tolist(), strict=True):
        similarity = _jaccard(sets[a], sets[b])
        if similarity >= threshold:
            pairs[(a, b)] = similarity
    return pairs


def score(
    ids: Sequence[str], pairs: dict[tuple[int, int], float], kept: Iterable[str], dropped: Iterable[str]
) -> dict[str, Any]:
    """A tool's dedup decisions against the truth: duplicate pairs left, rows dropped for nothing."""
    kept_ids, dropped_ids = set(kept), set(dropped)
    is_kept = np.array([doc in kept_ids for doc in ids])
    is_dropped = np.array([doc in dropped_ids for doc in ids])
    left = sum(1 for a, b in pairs if is_kept[a] and is_kept[b])
    covered = set()  # dropped rows with a kept row at J >= t
    for a, b in pairs:
        if is_dropped[a] and is_kept[b]:
            covered.add(a)
        if is_dropped[b] and is_kept[a]:
            covered.add(b)
    dropped_rows = int(is_dropped.sum())
    false_drops = dropped_rows - len(covered)
    return {
        "rows": len(ids),
        "kept": int(is_kept.sum()),
        "dropped": dropped_rows,
        "true_pairs": len(pairs),
        "pairs_left": left,
        "pairs_left_share": round(left / max(len(pairs), 1), 4),
        "false_drops": false_drops,
        "false_drop_share": round(false_drops / max(dropped_rows, 1), 4),
    }


def check(threshold: float = 0.7) -> None:
    """A hand-checkable case: the exact pairs of four tiny documents, by brute force and here."""
    texts = ["a b c d e f g h", "A, b c d e f g h!", "a b c d e f x y", "甲乙丙丁戊己庚辛"]
    langs = ["en", "en", "en", "zh"]
    brute = {}
    for a in range(len(texts)):
        for b in range(a + 1, len(texts)):
            x, y = shingle_set(texts[a], langs[a]), shingle_set(texts[b], langs[b])
            if x and y and len(x & y) / len(x | y) >= threshold:
                brute[(a, b)] = len(x & y) / len(x | y)
    found = similar_pairs(texts, langs, threshold)
    assert found.keys() == brute.keys() == {(0, 1)}, (found, brute)
    assert math.isclose(found[(0, 1)], 1.0)


if __name__ == "__main__":
    check()
    print("reference_dedup: exact pairs of the hand-checked case agree with brute force")
