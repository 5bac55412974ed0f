"""A spaCy tokenizer's special cases (its tokenizer exceptions) as tables for compiled code.

spaCy keeps some strings as given tokens whatever its affix rules say (`don't` -> `do` `n't`,
`peut-être`, `a-t-il` -> `a` `-t` `-il`). `scripts/build_quality_tables.py` (English) and
`scripts/build_spacy_french.py` (French) write them one per line: the string, the lengths of its
tokens, and how many tokens the affix rules alone make of it when spaCy finds it after splitting
(its `_special_matcher`; 0 for the others).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dataclean.quality.hashing import _index, fnv_hash, hash_set


def special_cases(path: Path) -> tuple[Any, ...]:
    """(the special cases as a `hash_set`, their token-length offsets, token lengths, the special
    cases the affix rules cut apart as a `hash_set` of special-case indexes, how many pieces the
    affix rules make of each special case, the most characters of one of those)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line:
            text, lengths, pieces = line.split("\t")
            rows.append((fnv_hash(text), [int(n) for n in lengths.split(",")], int(pieces), len(text)))
    offsets = np.zeros(len(rows) + 1, np.int64)
    offsets[1:] = np.cumsum([len(row[1]) for row in rows])
    piece_lengths = np.array([n for row in rows for n in row[1]], np.int64)
    specials = hash_set([row[0] for row in rows])
    split_keys, _ = hash_set([row[0] for row in rows if row[2]])
    split = (split_keys, np.array([_index(specials, int(h)) for h in split_keys], np.int64))
    return (
        specials,
        offsets,
        piece_lengths,
        split,
        np.array([row[2] for row in rows], np.int64),
        max((row[3] for row in rows if row[2]), default=0),
    )
