"""The n-gram index of the eval sets: built once per run on the driver, read by every worker.

`build_index` reads every eval set (`dataclean.contamination.evalsets`), hashes the n-grams of
each text field (`dataclean.contamination.ngrams`) and writes four files to a folder:
- `hashes.npy`: the distinct n-gram hashes, sorted (uint64);
- `starts.npy`: for hash k, its items are `owners[starts[k]:starts[k + 1]]` (int64);
- `owners.npy`: item numbers (int32), at most `max_owners` per hash (the items listed first, in
  eval-set order: a phrase shared by hundreds of items is attributed to the first few);
- `items.parquet`: per item number, its `eval_set` and `eval_item` (its id).

Memory: building holds the (hash, item) pairs of the whole index, 12 bytes each, sorted once (an
eval set of 100k items of 1,000 characters is about 100M characters: about 1.2 GB at the peak; a
typical QA or multiple-choice set is far smaller). Workers memory-map the arrays of a local index
(pages shared by the worker processes of a machine, read only where the lookups go) and read a
remote one whole.

`Index.lookup` matches a batch's n-grams: a binary search of every n-gram hash in `hashes`, then
the owners of the hits, counted per (row, item).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dataclean.contamination.evalsets import EvalSet, read_eval_set
from dataclean.contamination.ngrams import NGrams, ngram_hashes
from dataclean.io.files import load_array, make_dirs, read_parquet, save_array, write_parquet
from dataclean.io.shards import filesystem

MAX_OWNERS = 16


@dataclass(frozen=True)
class IndexSummary:
    """What the index holds, per eval set: items, and items with at least one n-gram."""

    folder: str
    items: dict[str, int]
    indexed: dict[str, int]
    ngrams: int


def build_index(
    eval_sets: Sequence[EvalSet],
    fields: Sequence[str],
    word_n: int,
    char_n: int,
    folder: str,
    max_owners: int = MAX_OWNERS,
) -> IndexSummary:
    """Hash every eval set's n-grams into the index files under `folder` (module docstring)."""
    make_dirs(folder)
    hashes: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    set_numbers: list[np.ndarray] = []
    item_ids: list[str] = []
    items: dict[str, int] = {}
    indexed: dict[str, int] = {}
    for number, eval_set in enumerate(eval_sets):
        first = len(item_ids)
        seen: list[np.ndarray] = []
        for batch in read_eval_set(eval_set, fields, posixpath.join(folder, "inputs")):
            base = len(item_ids)
            item_ids.extend(batch.ids)
            found = ngram_hashes(batch.texts, word_n, char_n)
            field_items = np.asarray(batch.rows, dtype=np.int64)[found.rows] + base
            hashes.append(found.hashes)
            owners.append(field_items.astype(np.int32))
            seen.append(np.unique(field_items))
        items[eval_set.name] = len(item_ids) - first
        indexed[eval_set.name] = len(np.unique(np.concatenate(seen))) if seen else 0
        set_numbers.append(np.full(len(item_ids) - first, number, dtype=np.int16))
    all_hashes = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    all_owners = np.concatenate(owners) if owners else np.zeros(0, np.int32)
    del hashes, owners
    order = np.lexsort((all_owners, all_hashes))
    all_hashes, all_owners = all_hashes[order], all_owners[order]
    del order
    keep = np.ones(len(all_hashes), dtype=bool)
    keep[1:] = (all_hashes[1:] != all_hashes[:-1]) | (all_owners[1:] != all_owners[:-1])
    all_hashes, all_owners = all_hashes[keep], all_owners[keep]
    distinct = np.ones(len(all_hashes), dtype=bool)
    distinct[1:] = all_hashes[1:] != all_hashes[:-1]
    group_starts = np.flatnonzero(distinct)
    sizes = np.diff(np.append(group_starts, len(all_hashes)))
    rank = np.arange(len(all_hashes)) - np.repeat(group_starts, sizes)  # place among its hash's items
    capped = rank < max_owners
    all_hashes, all_owners, distinct = all_hashes[capped], all_owners[capped], distinct[capped]
    starts = np.append(np.flatnonzero(distinct), len(all_hashes)).astype(np.int64)
    save_array(posixpath.join(folder, "hashes.npy"), all_hashes[distinct])
    save_array(posixpath.join(folder, "starts.npy"), starts)
    save_array(posixpath.join(folder, "owners.npy"), all_owners)
    sets = np.concatenate(set_numbers) if set_numbers else np.zeros(0, np.int16)
    names = [s.name for s in eval_sets]
    table = pa.table(
        {
            "eval_set": pa.DictionaryArray.from_arrays(pa.array(sets, pa.int16()), pa.array(names)),
            "eval_item": pa.array(item_ids, pa.string()),
        }
    )
    write_parquet(posixpath.join(folder, "items.parquet"), table)
    return IndexSummary(folder, items, indexed, int(distinct.sum()))


@dataclass
class Hits:
    """A batch's matches: per (row, item) pair the n-grams they share, and per row the n-grams
    that matched anything (`row_ngrams`); `matched` says which of the batch's n-grams hit."""

    rows: np.ndarray
    items: np.ndarray
    ngrams: np.ndarray
    row_ngrams: np.ndarray
    matched: np.ndarray


class Index:
    """The index files of `build_index`, opened for lookups (once per worker process)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.hashes = _open_array(posixpath.join(folder, "hashes.npy"))
        self.starts = _open_array(posixpath.join(folder, "starts.npy"))
        self.owners = _open_array(posixpath.join(folder, "owners.npy"))
        table = read_parquet(posixpath.join(folder, "items.parquet"))
        column = table.column("eval_set").combine_chunks()
        self.set_names: list[str] = column.dictionary.to_pylist()
        self.item_sets = column.indices.to_numpy(zero_copy_only=False)
        self.item_ids = table.column("eval_item")

    def lookup(self, found: NGrams, rows: int) -> Hits:
        """The hits of a batch of `rows` rows whose n-grams are `found`."""
        if len(self.hashes) == 0 or len(found.hashes) == 0:
            empty = np.zeros(0, np.int64)
            return Hits(empty, empty, empty, np.zeros(rows, np.int64), np.zeros(len(found.hashes), bool))
        at = np.minimum(np.searchsorted(self.hashes, found.hashes), len(self.hashes) - 1)
        matched = np.asarray(self.hashes[at] == found.hashes)
        hit = np.flatnonzero(matched)
        where = at[hit]
        first, last = np.asarray(self.starts[where]), np.asarray(self.starts[where + 1])
        counts = last - first
        hit_rows = np.repeat(found.rows[hit], counts)
        # The owners of each hit: the ranges [first, last) laid end to end.
        steps = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        hit_items = np.asarray(self.owners[np.repeat(first, counts) + steps]).astype(np.int64)
        pairs, pair_counts = np.unique(hit_rows * (1 << 32) + hit_items, return_counts=True)
        row_ngrams = np.bincount(found.rows[hit], minlength=rows)
        return Hits(pairs >> 32, pairs & 0xFFFFFFFF, pair_counts, row_ngrams, matched)


def _open_array(uri: str) -> np.ndarray:
    if "://" not in uri:
        _, path = filesystem(uri)
        array: np.ndarray = np.load(path, mmap_mode="r")
        return array
    return load_array(uri)
