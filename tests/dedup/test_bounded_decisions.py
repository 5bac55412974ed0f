"""The per-component decision stays linear on pages sharing a site template, and stays right.

Truth here is computed by the tests themselves in plain Python (word 5-gram sets of lowercase
texts, exhaustive pairwise Jaccard), never by the code under test.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dataclean import columns as C
from dataclean.dedup.partition import flat_lists
from dataclean.dedup.sets import prefix_tokens, sorted_sets
from dataclean.dedup.verify import MAX_CHECKS, NEAR, component_bounds, decide
from dataclean.stages.dedup import DropDuplicates
from tests.stages.test_dedup_stage import decisions, run

THRESHOLD = 0.7


def words(count: int, rng: random.Random) -> list[str]:
    return ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 8))) for _ in range(count)]


def template_corpus(pages: int, template_words: int, own_words: int, copies: int, seed: int = 1) -> pa.Table:
    """Pages of one template (half before, half after) around words of their own; `copies` of
    them get a planted near copy (2% of all words replaced) with a larger id."""
    rng = random.Random(seed)
    template = words(template_words, rng)
    head, tail = template[: template_words // 2], template[template_words // 2 :]
    texts = [" ".join(head + words(own_words, rng) + tail) for _ in range(pages)]
    ids = [f"page{number:04d}" for number in range(pages)]
    for number, source in enumerate(rng.sample(range(pages), copies)):
        tokens = texts[source].split()
        for _ in range(max(1, len(tokens) // 50)):
            tokens[rng.randrange(len(tokens))] = words(1, rng)[0]
        texts.append(" ".join(tokens))
        ids.append(f"zcopy{number:03d}-of-page{source:04d}")
    order = list(range(len(ids)))
    rng.shuffle(order)
    return pa.table({C.ID: [ids[i] for i in order], C.TEXT: [texts[i] for i in order]})


def shingle_set(text: str) -> set[str]:
    tokens = text.lower().split()
    return {" ".join(tokens[i : i + 5]) for i in range(len(tokens) - 4)}


def jaccard(a: set[Any], b: set[Any]) -> float:
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def exhaustive(table: pa.Table) -> dict[str, str]:
    """The greedy decision over all pairs: rows by id; a row whose most similar kept row is at or
    over the threshold (ties: smallest id) is its duplicate, else it is kept. id -> kept id."""
    rows = sorted(zip(table.column(C.ID).to_pylist(), table.column(C.TEXT).to_pylist(), strict=True))
    kept: list[tuple[str, set[str]]] = []
    dropped = {}
    for row_id, text in rows:
        shingles = shingle_set(text)
        best, best_id = 0.0, ""
        for other_id, other in kept:  # in id order: a tie keeps the smaller id
            similarity = jaccard(shingles, other)
            if similarity > best:
                best, best_id = similarity, other_id
        if best >= THRESHOLD:
            dropped[row_id] = best_id
        else:
            kept.append((row_id, shingles))
    return dropped


def test_template_pages_give_the_exhaustive_decisions(tmp_path: Path) -> None:
    table = template_corpus(pages=150, template_words=350, own_words=150, copies=12)
    found = decisions(run(DropDuplicates(threshold=THRESHOLD), table, tmp_path, shards=3))
    dropped = {row: reason.split(":", 1)[1] for row, (reason, _) in found.items() if reason}
    assert dropped == exhaustive(table)
    planted = {row: row.split("-of-")[1] for row in table.column(C.ID).to_pylist() if "-of-" in row}
    assert dropped == planted  # every planted copy, of its own page, and nothing else


def _decide_one_component(table: pa.Table) -> tuple[np.ndarray, np.ndarray, int, list[str], list[set[str]]]:
    """decide() over all rows of `table` as one component, rows by id (keep=first)."""
    stage = DropDuplicates(threshold=THRESHOLD)
    summary = stage.observe(table).sort_by("id")
    keys, key_offsets = flat_lists(summary.column("keys"))
    sketch, sketch_offsets = flat_lists(summary.column("sketch"))
    count = summary.num_rows
    kind, target, _, checks = decide(
        np.zeros(count, np.int64),
        np.zeros(count, np.bool_),
        pc.fill_null(summary.column("exact"), 0).to_numpy(),
        keys.astype(np.uint64),
        key_offsets,
        sketch.astype(np.uint32),
        sketch_offsets,
        THRESHOLD,
        True,
        True,
        True,
    )
    ids = summary.column("id").to_pylist()
    by_id = dict(zip(table.column(C.ID).to_pylist(), table.column(C.TEXT).to_pylist(), strict=True))
    return kind, target, checks, ids, [shingle_set(by_id[row]) for row in ids]


def test_comparisons_grow_with_the_pages_not_with_their_pairs() -> None:
    # Template pages at Jaccard about 0.5: all of them collide in LSH bands. Comparing each page
    # with every center sharing a band was quadratic; prefix shingles find only the true copies.
    small = _decide_one_component(template_corpus(200, 350, 150, copies=10))
    large = _decide_one_component(template_corpus(800, 350, 150, copies=40, seed=2))
    assert small[2] <= 2 * 10
    assert large[2] <= 2 * 40
    assert int(np.sum(large[0] == NEAR)) == 40


def test_caps_bound_the_work_and_every_drop_is_within_the_threshold() -> None:
    # 75% template: two pages are at about 0.6, under the threshold, and the prefix of every
    # page holds template shingles that every other page holds too: only the caps bound the work.
    table = template_corpus(pages=400, template_words=300, own_words=100, copies=20, seed=3)
    kind, target, checks, ids, shingles = _decide_one_component(table)
    assert checks <= MAX_CHECKS * len(ids)
    dropped = np.flatnonzero(kind == NEAR)
    for row in dropped:
        assert kind[target[row]] != NEAR  # names a kept row
        assert jaccard(shingles[row], shingles[target[row]]) >= THRESHOLD
    planted = {row for row in ids if "-of-" in row}
    assert {ids[row] for row in dropped} == planted


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prefix_tokens_of_every_similar_pair_meet(seed: int) -> None:
    """Prefix filtering's guarantee, on random sets with many pairs near the threshold."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**32, size=(12, 60), dtype=np.uint32)
    rows = []
    for _ in range(60):
        row = base[rng.integers(12)].copy()
        changed = rng.integers(0, 60, size=int(rng.integers(0, 15)))
        row[changed] = rng.integers(0, 2**32, size=len(changed), dtype=np.uint32)
        rows.append(row[: int(rng.integers(40, 61))])
    offsets = np.concatenate([[0], np.cumsum([len(row) for row in rows])]).astype(np.int64)
    sets, set_offsets = sorted_sets(np.concatenate(rows), offsets)
    tokens, token_offsets = prefix_tokens(
        sets, set_offsets, component_bounds(np.zeros(60, np.int64)), THRESHOLD
    )
    members = [set(sets[set_offsets[i] : set_offsets[i + 1]].tolist()) for i in range(60)]
    prefixes = [set(tokens[token_offsets[i] : token_offsets[i + 1]].tolist()) for i in range(60)]
    similar = 0
    for a, b in itertools.combinations(range(60), 2):
        if jaccard(members[a], members[b]) >= THRESHOLD:
            similar += 1
            assert prefixes[a] & prefixes[b]
    assert similar > 10
