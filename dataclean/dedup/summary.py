"""Per-row dedup summaries: what `fit` needs to know about a row, computed batch by batch.

One summary row per input row (`SUMMARY_SCHEMA`):
- `id`: the row's id;
- `exact`: XXH64 of the normalized text (null when it normalizes to "": such rows are never
  duplicates);
- `keys`: the keys a row is grouped by: one per LSH band (near dedup) plus one from the exact
  hash (exact dedup), so texts with equal normalized forms always meet even when their rows
  were shingled differently (another `lang`);
- `priority`: the keep rule as a number, lowest wins (ties: smallest id);
- `sketch`: what a candidate pair is checked with: the shingle hashes (exact Jaccard; about 4
  bytes per word or character), or the MinHash signature (estimated Jaccard; 4 bytes x num_perm);
- `source`: the row's `source` (else `domain`) column as a string, null without one: what the
  alarms count removed rows by (`dataclean.dedup.alarms`). Summaries written before it existed
  read it as null.

Summaries are about 20 + 8 x (bands + 1) bytes per row plus the sketch: with the defaults, about
0.8x the text for English (4 bytes per word of about 6) and 1.4x for Chinese (4 per character).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C
from dataclean.dedup.alarms import SOURCE_COLUMNS
from dataclean.dedup.hashing import xxh64_ranges
from dataclean.dedup.minhash import band_keys, signatures
from dataclean.dedup.shingles import DEFAULT_FOLD, Normalized
from dataclean.errors import ConfigError

SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("exact", pa.uint64()),
        pa.field("keys", pa.list_(pa.uint64())),
        pa.field("priority", pa.float64()),
        pa.field("sketch", pa.list_(pa.uint32())),
        pa.field("source", pa.string()),
    ]
)

# Seed of the exact-text hash used as a grouping key (band keys use the band number, 0..).
EXACT_KEY_SEED = 0x5EED_E7AC


@dataclass(frozen=True)
class Sketch:
    """How texts become summaries; two summaries can only be compared if their Sketches are equal.

    `keep` is "first" (all priorities 0: the smallest id wins), "longest" (most characters
    wins), or a column name (lowest value wins; "-name": highest wins; null loses).
    """

    ngram_size: int
    num_perm: int
    seed: int
    bands: int
    rows: int
    fold: tuple[str, ...] = DEFAULT_FOLD
    exact: bool = True
    near: bool = True
    verify: bool = True
    keep: str = "first"

    def compatible(self) -> dict[str, object]:
        """The fields that must match between an index and a run (all but `keep`)."""
        fields = asdict(self)
        fields.pop("keep")
        fields["fold"] = list(self.fold)
        return fields

    def summarize(self, table: pa.Table) -> pa.Table:
        """Summary rows of one batch (see the module docstring)."""
        texts = table.column(C.TEXT)
        normalized = Normalized(texts, self.fold)
        empty = np.diff(normalized.offsets) == 0
        exact = xxh64_ranges(normalized.data, normalized.offsets, 0)
        key_columns = []
        sketch = pa.nulls(table.num_rows, pa.list_(pa.uint32()))
        if self.near:
            langs = table.column(C.LANG) if C.LANG in table.column_names else None
            signature, hash_offsets, hashes = signatures(
                normalized.data,
                normalized.offsets,
                normalized.modes(langs),
                self.ngram_size,
                self.num_perm,
                self.seed,
                keep_hashes=self.verify,
            )
            key_columns.append(band_keys(signature, self.bands, self.rows))
            if self.verify:
                sketch = pa.ListArray.from_arrays(pa.array(hash_offsets), pa.array(hashes))
            else:
                flat = pa.array(signature.reshape(-1))
                offsets = np.arange(0, signature.size + 1, self.num_perm, dtype=np.int64)
                sketch = pa.ListArray.from_arrays(pa.array(offsets), flat)
        if self.exact:
            exact_keys = xxh64_ranges(normalized.data, normalized.offsets, EXACT_KEY_SEED)
            key_columns.append(exact_keys.reshape(-1, 1))
        keys = np.hstack(key_columns)
        per_row = keys.shape[1]
        key_offsets = np.arange(0, keys.size + 1, per_row, dtype=np.int64)
        mask = pa.array(empty)
        return pa.table(
            {
                "id": pc.cast(table.column(C.ID), pa.string()),
                "exact": pa.array(exact, mask=empty),
                "keys": pa.ListArray.from_arrays(
                    pa.array(key_offsets), pa.array(keys.reshape(-1)), mask=mask
                ),
                "priority": pa.array(self.priorities(table), pa.float64()),
                "sketch": sketch,
                "source": _source(table),
            },
            schema=SUMMARY_SCHEMA,
        )

    def priorities(self, table: pa.Table) -> np.ndarray:
        """The keep rule per row as float64, lowest wins."""
        if self.keep == "first":
            return np.zeros(table.num_rows)
        if self.keep == "longest":
            lengths = pc.utf8_length(pc.fill_null(table.column(C.TEXT), ""))
            longest_first: np.ndarray = -lengths.to_numpy().astype(np.float64)
            return longest_first
        descending = self.keep.startswith("-")
        name = self.keep[1:] if descending else self.keep
        if name not in table.column_names:
            raise ConfigError(
                f"dedup.keep: column {name!r} is not in the input (columns: {', '.join(table.column_names)})"
            )
        values: np.ndarray = pc.cast(table.column(name), pa.float64()).to_numpy(zero_copy_only=False)
        values = -values if descending else values.copy()
        values[np.isnan(values)] = np.inf
        return values


def _source(table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """The row's source column (`SOURCE_COLUMNS`, the first present) as strings, else nulls."""
    for name in SOURCE_COLUMNS:
        if name in table.column_names:
            return pc.cast(table.column(name), pa.string())
    return pa.nulls(table.num_rows, pa.string())


def keep_rule_is_valid(keep: str) -> bool:
    """ "first", "longest", or a column name optionally prefixed by "-"."""
    name = keep[1:] if keep.startswith("-") else keep
    return bool(name) and not any(char.isspace() for char in name)
