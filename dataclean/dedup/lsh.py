"""LSH banding: how many bands of how many rows, chosen for recall.

Two texts whose signatures agree on every row of at least one band become candidates; with true
Jaccard J that happens with probability 1 - (1 - J**rows)**bands. datasketch's `MinHashLSH`
picks (bands, rows) minimizing a weighted sum of the false-positive and false-negative areas
around the threshold; with its default equal weights, threshold 0.8 gives b=9, r=13, which
found only 61% of the pairs with true Jaccard in [0.8, 0.9) on this project's corpus (docs/measurements.md).
Dedup weighs false negatives 49:1 instead (b=23, r=5 at 0.7; b=17, r=7 at 0.8: a pair exactly
at the threshold becomes a candidate with probability 0.985 and 0.982) and removes the extra
false positives afterwards by checking every candidate's Jaccard (exact or estimated). The
price is more keys to shuffle (b) and more candidates to check: at 0.7, pairs with Jaccard 0.5
become candidates half of the time.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

# Weight of a missed duplicate against a false candidate when choosing bands and rows.
FALSE_NEGATIVE_WEIGHT = 0.98


@lru_cache(maxsize=64)  # the optimizer scans every (b, r): ~30 ms, and observe asks per batch
def choose_bands(
    threshold: float, num_perm: int, false_negative_weight: float = FALSE_NEGATIVE_WEIGHT
) -> tuple[int, int]:
    """(bands, rows) from datasketch's optimizer, weighting false negatives as given; kept in
    the kernel cache folder (`_remembered`), so that only a first run imports datasketch."""
    key = f"{threshold!r} {num_perm} {false_negative_weight!r} datasketch {metadata.version('datasketch')}"
    path = _remembered()
    known = _read(path) if path is not None else {}
    if key in known:
        bands, rows = known[key]
        return int(bands), int(rows)
    from datasketch import MinHashLSH  # here, not at the top: workers never need it (nor scipy)

    weights = (1.0 - false_negative_weight, false_negative_weight)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=weights)
    if path is not None:
        _write(path, {**known, key: [lsh.b, lsh.r]})
    return lsh.b, lsh.r


def _remembered() -> Path | None:
    """Where chosen bands are kept: the kernel cache folder (`NUMBA_CACHE_DIR`, which importing
    dataclean sets): importing datasketch and the scipy it imports took 0.4-1 s of every run's
    driver, before its first shard."""
    folder = os.environ.get("NUMBA_CACHE_DIR")
    return Path(folder) / "dataclean-lsh" / "bands.json" if folder else None


def _read(path: Path) -> dict[str, list[int]]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write(path: Path, known: dict[str, list[int]]) -> None:
    """Under a unique temporary name, then renamed; a folder that cannot be written costs the
    next run the optimizer again, never an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w") as file:
            json.dump(known, file)
        os.replace(temporary, path)
    except OSError:
        pass


def candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    """Probability that two texts with this true Jaccard share at least one band."""
    return 1.0 - (1.0 - jaccard**rows) ** bands
