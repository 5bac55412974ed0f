"""Find near-duplicates of a small set of texts (the quarantined ones) among many rows.

Built on the dedup stage's machinery, so "the same text" means one thing in dataclean: texts are
normalized by `dataclean.dedup.shingles.Normalized` (case, width, punctuation and digits folded,
whitespace collapsed), shingled as character `ngram_size`-grams (spaces removed: works for Chinese,
which has none, as for English) and signed by `dataclean.dedup.minhash.signatures` (datasketch's
affine32 MinHash); LSH band keys are `minhash.band_keys` (128 permutations in 16 bands of 8 rows:
pairs at Jaccard 0.8 collide with probability 0.98, at 0.5 with 0.06). Every candidate is
verified on the exact Jaccard of the two shingle sets, which the team measured
(docs/measurements.md) at precision 0.95 / recall 0.98 against LSH alone at 0.61 recall.

Character grams rather than dedup's word grams for space-delimited text: a quarantine list holds
a few texts whose edited copies must not come back, and a two-word edit of a 100-word paragraph
leaves its character 5-grams at Jaccard ~0.9 but its word 5-grams near 0.8.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dataclean.dedup.minhash import band_keys, signatures
from dataclean.dedup.shingles import CHARACTERS, Normalized

SHINGLE = 5
SEED = 1


def _sketches(
    texts: Sequence[str | None], ngram_size: int, num_perm: int, bands: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(band keys: rows x bands, each row's sorted unique shingle hashes) of a batch of texts."""
    normalized = Normalized([text or "" for text in texts])
    modes = np.full(len(normalized), CHARACTERS, dtype=np.uint8)
    signed, offsets, hashes = signatures(
        normalized.data, normalized.offsets, modes, ngram_size, num_perm, SEED, keep_hashes=True
    )
    keys = band_keys(signed, bands, num_perm // bands)
    sets = [np.unique(hashes[offsets[row] : offsets[row + 1]]) for row in range(len(normalized))]
    return keys, sets


def shingle_hashes(text: str, ngram_size: int = SHINGLE) -> np.ndarray:
    """Sorted unique hashes of the text's character n-grams (after dedup's normalization)."""
    return _sketches([text], ngram_size, 16, 16)[1][0]


class NearDuplicateIndex:
    """Texts indexed by key; `query(text)` returns the most similar key at Jaccard >= threshold."""

    def __init__(
        self, threshold: float = 0.8, num_perm: int = 128, bands: int = 16, ngram_size: int = SHINGLE
    ):
        if num_perm % bands:
            raise ValueError(f"num_perm ({num_perm}) must be a multiple of bands ({bands})")
        self.threshold = threshold
        self.num_perm = num_perm
        self.bands = bands
        self.ngram_size = ngram_size
        self._buckets: dict[tuple[int, int], list[str]] = {}
        self._shingles: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._shingles)

    def add_many(self, keys: Sequence[str], texts: Sequence[str | None]) -> None:
        """Index each text under its key (a key already indexed, or an empty text, is passed over)."""
        fresh = [
            (key, text) for key, text in zip(keys, texts, strict=True) if text and key not in self._shingles
        ]
        if not fresh:
            return
        band_rows, sets = _sketches([text for _, text in fresh], self.ngram_size, self.num_perm, self.bands)
        for (key, _), row_keys, shingles in zip(fresh, band_rows, sets, strict=True):
            if key in self._shingles or len(shingles) == 0:
                continue
            self._shingles[key] = shingles
            for band, band_key in enumerate(row_keys.tolist()):
                self._buckets.setdefault((band, band_key), []).append(key)

    def add(self, key: str, text: str) -> None:
        """Index one text under `key`."""
        self.add_many([key], [text])

    def query_many(self, texts: Sequence[str | None]) -> list[tuple[str, float] | None]:
        """For each text, (key, Jaccard) of the most similar indexed text at Jaccard >= threshold."""
        found: list[tuple[str, float] | None] = [None] * len(texts)
        rows = [row for row, text in enumerate(texts) if text]
        if not self._shingles or not rows:
            return found
        band_rows, sets = _sketches([texts[row] for row in rows], self.ngram_size, self.num_perm, self.bands)
        for row, row_keys, shingles in zip(rows, band_rows, sets, strict=True):
            if len(shingles) == 0:
                continue
            candidates = {
                key
                for band, band_key in enumerate(row_keys.tolist())
                for key in self._buckets.get((band, band_key), ())
            }
            best: tuple[str, float] | None = None
            for key in sorted(candidates):
                other = self._shingles[key]
                shared = len(np.intersect1d(shingles, other, assume_unique=True))
                jaccard = shared / (len(shingles) + len(other) - shared)
                if jaccard >= self.threshold and (best is None or jaccard > best[1]):
                    best = (key, jaccard)
            found[row] = best
        return found

    def query(self, text: str) -> tuple[str, float] | None:
        """(key, Jaccard) of the most similar indexed text at Jaccard >= threshold, else None."""
        return self.query_many([text])[0]
