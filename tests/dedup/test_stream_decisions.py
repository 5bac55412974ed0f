"""A component decided in chunks: the same decisions as whole, and held memory bounded by chunk.

Truth: the exhaustive pairwise check of `tests.dedup.test_bounded_decisions` (plain Python over
word 5-gram sets) and the planted copies; decisions in chunks are also compared with `decide`
over the same rows whole.
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dataclean import columns as C
from dataclean.dedup import reduce, stream
from dataclean.dedup.partition import flat_lists
from dataclean.dedup.stream import Chunk, StreamStats, decide_component
from dataclean.dedup.verify import EXACT, MAX_CHECKS, MAX_POSTINGS, NEAR, ClusterCandidates, decide
from dataclean.stages.dedup import DropDuplicates
from tests.dedup.test_bounded_decisions import THRESHOLD, exhaustive, template_corpus
from tests.stages.test_dedup_stage import decisions, run


class _Summaries:
    """A component's rows read from summary rows in memory (`stream.ComponentReader`)."""

    def __init__(self, summary: pa.Table) -> None:
        self.summary = summary

    def sketches(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, offsets = flat_lists(self.summary.column("sketch").take(pa.array(rows)))
        return values.astype(np.uint32), offsets

    def keys(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, offsets = flat_lists(self.summary.column("keys").take(pa.array(rows)))
        return values.astype(np.uint64), offsets


def _with_exact_copies(table: pa.Table, count: int) -> pa.Table:
    copies = table.slice(0, count)
    ids = [f"zexact{number:03d}" for number in range(count)]
    return pa.concat_tables([table, pa.table({C.ID: ids, C.TEXT: copies.column(C.TEXT)})])


def _chunked(
    summary: pa.Table,
    earlier: np.ndarray,
    flags: tuple[bool, bool, bool],
    chunk: Chunk,
    limits: tuple[int, int] = (MAX_POSTINGS, MAX_CHECKS),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, StreamStats]:
    count = summary.num_rows
    kind, target, score = np.zeros(count, np.int8), np.arange(count), np.full(count, np.nan)
    stats = StreamStats()
    checks = decide_component(
        _Summaries(summary),
        np.arange(count),
        earlier,
        pc.fill_null(summary.column("exact"), 0).to_numpy(),
        pc.list_value_length(summary.column("sketch")).to_numpy().astype(np.int64),
        flags,
        THRESHOLD,
        np.array(limits, np.int64),
        (kind, target, score),
        stats,
        chunk,
    )
    return kind, target, score, checks, stats


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("exact", [True, False])
def test_a_component_in_chunks_decides_as_whole(
    verify: bool, exact: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 200 template words around 60 of each page's own: pages at about 0.6, so the caps bind;
    # exact copies, and rows of an earlier output (never dropped, always win) first.
    table = _with_exact_copies(template_corpus(pages=300, template_words=200, own_words=60, copies=30), 20)
    summary = DropDuplicates(threshold=THRESHOLD, exact=exact, verify=verify).observe(table).sort_by("id")
    count = summary.num_rows
    earlier = np.zeros(count, np.bool_)
    earlier[:5] = True
    keys, key_offsets = flat_lists(summary.column("keys"))
    sketch, sketch_offsets = flat_lists(summary.column("sketch"))
    whole = decide(
        np.zeros(count, np.int64),
        earlier,
        pc.fill_null(summary.column("exact"), 0).to_numpy(),
        keys.astype(np.uint64),
        key_offsets,
        sketch.astype(np.uint32),
        sketch_offsets,
        THRESHOLD,
        exact,
        True,
        verify,
    )
    assert np.sum(whole[0] == NEAR) >= 30 and (not exact or np.sum(whole[0] == EXACT) >= 10)
    for chunk, shared_tokens in (
        (Chunk(rows=7), 500),
        (Chunk(rows=64, values=3000), 10**9),
        (Chunk(), 10**9),
    ):
        monkeypatch.setattr(stream, "SHARED_TOKENS", shared_tokens)  # 500: shared tokens in parts
        kind, target, score, checks, stats = _chunked(summary, earlier, (exact, True, verify), chunk)
        assert np.array_equal(kind, whole[0]) and np.array_equal(target, whole[1])
        assert np.array_equal(score, whole[2], equal_nan=True) and checks == whole[3]
        assert stats.chunk_rows <= chunk.rows


def test_caps_that_are_not_a_power_of_two_decide_as_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # A token's entries grow in blocks of 1, 2, 4, 8 (`centers.file_center`): with at most 5 a
    # token, its last block is only partly used, and the caps bind on almost every page.
    monkeypatch.setattr("dataclean.dedup.verify.MAX_POSTINGS", 5)
    monkeypatch.setattr("dataclean.dedup.verify.MAX_CHECKS", 3)
    table = template_corpus(pages=300, template_words=200, own_words=60, copies=30)
    summary = DropDuplicates(threshold=THRESHOLD).observe(table).sort_by("id")
    count = summary.num_rows
    earlier = np.zeros(count, np.bool_)
    keys, key_offsets = flat_lists(summary.column("keys"))
    sketch, sketch_offsets = flat_lists(summary.column("sketch"))
    exact_hash = pc.fill_null(summary.column("exact"), 0).to_numpy()
    whole = decide(
        np.zeros(count, np.int64),
        earlier,
        exact_hash,
        keys.astype(np.uint64),
        key_offsets,
        sketch.astype(np.uint32),
        sketch_offsets,
        THRESHOLD,
        True,
        True,
        True,
    )
    for chunk in (Chunk(rows=7), Chunk()):
        kind, target, score, checks, _ = _chunked(summary, earlier, (True, True, True), chunk, (5, 3))
        assert np.array_equal(kind, whole[0]) and np.array_equal(target, whole[1])
        assert np.array_equal(score, whole[2], equal_nan=True) and checks == whole[3]


def _letters(number: int) -> str:
    """A word of its own for each number (letters only: the exact text folds digits)."""
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word += chr(ord("a") + digit)
        if number == 0:
            return word


def _distinct_template_pages(pages: int, copies: int) -> pa.Table:
    """Pages of one 350-word template around 150 words no other page has (so no page shares a
    shingle with another by chance), and `copies` planted near copies (10 words replaced)."""
    rng = random.Random(pages)
    template = [f"t{_letters(number)}" for number in range(350)]
    texts = [
        " ".join(template[:175] + [f"p{_letters(page * 150 + word)}" for word in range(150)] + template[175:])
        for page in range(pages)
    ]
    ids = [f"page{page:05d}" for page in range(pages)]
    for number, source in enumerate(rng.sample(range(pages), copies)):
        tokens = texts[source].split()
        for edit in range(10):
            tokens[rng.randrange(len(tokens))] = f"e{_letters(number * 10 + edit)}"
        texts.append(" ".join(tokens))
        ids.append(f"zcopy{number:03d}-of-page{source:05d}")
    return pa.table({C.ID: ids, C.TEXT: texts})


def test_what_a_chunked_component_holds_grows_with_its_copies_not_its_pages() -> None:
    # Template pages (about 0.5 of each other, one LSH component) with planted near copies: the
    # only prefix shingles two pages share are a copy's and its page's (and, rarely, two 32-bit
    # shingle hashes that collide: about P^2 / 2^33 for P prefix shingles, under 1 here), so
    # the only centers kept between chunks are the copied pages, at 4x the pages as at 1x.
    for pages, copies in ((100, 5), (400, 5)):
        table = _distinct_template_pages(pages, copies)
        summary = DropDuplicates(threshold=THRESHOLD).observe(table).sort_by("id")
        chunk = Chunk(rows=50, values=50 * 600)
        kind, target, _, _, stats = _chunked(
            summary, np.zeros(summary.num_rows, np.bool_), (True, True, True), chunk
        )
        assert stats.chunk_rows <= chunk.rows and stats.chunk_values <= chunk.values
        ids = summary.column(C.ID).to_pylist()
        dropped = {ids[row]: ids[target[row]] for row in np.flatnonzero(kind == NEAR)}
        assert dropped == {row: row.split("-of-")[1] for row in ids if "-of-" in row}
        assert copies <= stats.filed_centers <= copies + 1


def _tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clustering task of a fit reads at most 16 rows at once (shipped with the task)."""
    monkeypatch.setattr(reduce, "ClusterCandidates", partial(ClusterCandidates, chunk=Chunk(16, 16 * 600)))


def test_a_fit_in_tiny_chunks_gives_the_exhaustive_decisions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = template_corpus(pages=150, template_words=350, own_words=150, copies=12)
    _tiny_chunks(monkeypatch)
    found = decisions(run(DropDuplicates(threshold=THRESHOLD), table, tmp_path, shards=3))
    dropped = {row: reason.split(":", 1)[1] for row, (reason, _) in found.items() if reason}
    assert dropped == exhaustive(table)
    planted = {row: row.split("-of-")[1] for row in table.column(C.ID).to_pylist() if "-of-" in row}
    assert dropped == planted


def test_tiny_chunks_on_ray_decide_as_local_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_executor: Any
) -> None:
    from dataclean.executors.ray import RayExecutor

    table = _with_exact_copies(template_corpus(pages=200, template_words=200, own_words=80, copies=15), 10)
    whole = decisions(run(DropDuplicates(threshold=THRESHOLD), table, tmp_path, shards=2, by_shard=True))
    assert any(reason for reason, _ in whole.values())
    _tiny_chunks(monkeypatch)
    for executor in (RayExecutor(workers=1), ray_executor):
        chunked = run(DropDuplicates(threshold=THRESHOLD), table, tmp_path, 2, executor, by_shard=True)
        assert decisions(chunked) == whole, executor.workers
