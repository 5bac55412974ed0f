"""LSH banding: how many bands of how many rows, chosen for recall.

Two texts whose signatures agree on every row of at least one band become candidates; with true
Jaccard J that happens with probability 1 - (1 - J**rows)**bands. datasketch's `MinHashLSH`
picks (bands, rows) minimizing a weighted sum of the false-positive and false-negative areas
around the threshold; with its default equal weights, threshold 0.8 gives b=9, r=13, which
found only 61% of the pairs with true Jaccard in [0.8, 0.9) on this project's corpus (NOTES.md).
Dedup weighs false negatives 9:1 instead (b=20, r=6 at 0.7; b=14, r=9 at 0.8) and removes the
extra false positives afterwards by checking every candidate's Jaccard (exact or estimated).
"""

from __future__ import annotations

from datasketch import MinHashLSH

# Weight of a missed duplicate against a false candidate when choosing bands and rows.
FALSE_NEGATIVE_WEIGHT = 0.9


def choose_bands(
    threshold: float, num_perm: int, false_negative_weight: float = FALSE_NEGATIVE_WEIGHT
) -> tuple[int, int]:
    """(bands, rows) from datasketch's optimizer, weighting false negatives as given."""
    weights = (1.0 - false_negative_weight, false_negative_weight)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=weights)
    return lsh.b, lsh.r


def candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    """Probability that two texts with this true Jaccard share at least one band."""
    return 1.0 - (1.0 - jaccard**rows) ** bands
