"""MinHash signatures on one core: dataclean from raw text against datasketch and rensa at their best.

    python benchmarks/bench_signatures.py [--docs 5000] [--rounds 5] [--data PATH] [--json OUT]

Input: the first `--docs` documents of bench_dedup's labeled corpus (real English and 20% Chinese
sentences, near and exact copies mixed in). Every implementation makes 128-permutation MinHash
signatures of the same documents' 5-gram shingles (words; characters for Chinese):

- dataclean: from raw text, its own normalization, shingling, hashing and permutations
  (`Normalized` + `signatures`, whole batches), the work its dedup does;
- datasketch `MinHash.bulk` (its batch API, which reuses one set of permutations) on pre-built
  shingles (bytes), with its default SHA-1 hash and with `hashfunc=xxhash.xxh32_intdigest` (the
  faster hash its documentation suggests plugging in);
- rensa (a Rust MinHash on PyPI) on pre-built shingles: `RMinHash.digest_matrix_from_token_sets`
  and `CMinHash.digests_from_token_sets` (its bulk APIs), and `RMinHash` with the shingles built in
  Python inside the timer (what a user starting from raw text pays). rensa runs with
  RAYON_NUM_THREADS=1 (its bulk calls can use a thread pool): every rate here is per core.

The peers' shingles are built by `benchmarks/reference_dedup.py` (NFKC, lowercase, punctuation to
spaces; not dataclean's code); building them is outside the timer except in the "Python
shingling" row. Each implementation is called once untimed (warm-up: imports, first calls,
dataclean's compiled kernels loaded from numba's cache), then once per round in a rotating order
(`benchmarks/rounds.py`): seconds are the median with min-max over rounds, and each ratio is the
median of the per-round ratios (never a ratio of two different rounds). Peak memory is measured
during the warm-up call, above the input (`benchmarks/measure.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# rensa's bulk calls may run on a Rayon thread pool: one thread, so that every rate is per core.
os.environ.setdefault("RAYON_NUM_THREADS", "1")

from benchmarks import corpus as data
from benchmarks.measure import Measurement, PeakMemory, comparison, write_json
from benchmarks.reference_dedup import shingle_set
from benchmarks.rounds import describe, timed_rounds

NUM_PERM = 128


def _ours(texts: pa.Array, langs: pa.Array) -> Callable[[], Any]:
    from dataclean.dedup.minhash import signatures
    from dataclean.dedup.shingles import Normalized

    def run() -> Any:
        normalized = Normalized(texts)
        return signatures(normalized.data, normalized.offsets, normalized.modes(langs), 5, NUM_PERM, 1)

    return run


def _datasketch(shingles: list[list[bytes]], hashfunc: Any = None) -> Callable[[], Any]:
    from datasketch import MinHash

    options: dict[str, Any] = {"num_perm": NUM_PERM, "seed": 1}
    if hashfunc is not None:
        options["hashfunc"] = hashfunc
    return lambda: [m.hashvalues for m in MinHash.bulk(shingles, **options)]


def _rensa_r(shingles: list[list[str]]) -> Callable[[], Any]:
    from rensa import RMinHash

    return lambda: RMinHash.digest_matrix_from_token_sets(shingles, num_perm=NUM_PERM, seed=1)


def _rensa_c(shingles: list[list[str]]) -> Callable[[], Any]:
    from rensa import CMinHash

    return lambda: CMinHash.digests_from_token_sets(shingles, num_perm=NUM_PERM, seed=1)


def _rensa_python_shingles(texts: list[str], langs: list[str]) -> Callable[[], Any]:
    from rensa import RMinHash

    def run() -> Any:
        built = [list(shingle_set(text, lang)) for text, lang in zip(texts, langs, strict=True)]
        return RMinHash.digest_matrix_from_token_sets(built, num_perm=NUM_PERM, seed=1)

    return run


def candidates(texts: list[str], langs: list[str]) -> dict[str, tuple[str, Callable[[], Any]]]:
    """Name -> (label, call) for every implementation that is installed (peers may be missing)."""
    import importlib.util

    import xxhash

    built = [list(shingle_set(text, lang)) for text, lang in zip(texts, langs, strict=True)]
    as_bytes = [[s.encode("utf-8") for s in row] for row in built]
    from dataclean.dedup.shingles import Normalized

    array = pa.array(texts)
    found: dict[str, tuple[str, Callable[[], Any]]] = {
        "dataclean": ("dataclean MinHash from raw text", _ours(array, pa.array(langs))),
        # where dataclean's time goes: its normalization pass alone (not a comparison row)
        "dataclean_normalize": ("dataclean normalization alone", lambda: Normalized(array)),
    }
    if importlib.util.find_spec("datasketch"):
        found["datasketch_sha1"] = (
            "datasketch MinHash.bulk (SHA-1), shingles pre-built",
            _datasketch(as_bytes),
        )
        found["datasketch_xxh32"] = (
            "datasketch MinHash.bulk (hashfunc xxh32), shingles pre-built",
            _datasketch(as_bytes, xxhash.xxh32_intdigest),
        )
    if importlib.util.find_spec("rensa"):
        found["rensa_r"] = ("rensa RMinHash (bulk matrix), shingles pre-built", _rensa_r(built))
        found["rensa_c"] = ("rensa CMinHash (bulk), shingles pre-built", _rensa_c(built))
        found["rensa_r_python"] = (
            "rensa RMinHash with Python shingling",
            _rensa_python_shingles(texts, langs),
        )
    return found


def signature_rows(
    texts: list[str], langs: list[str], rounds: int, note: str
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """One comparison row per peer: dataclean against it, timed in the same rounds; and the
    median seconds of dataclean's whole pass and of its normalization alone."""
    megabytes = sum(len(text.encode()) for text in texts) / 1e6
    found = candidates(texts, langs)
    peaks: dict[str, float | None] = {}
    for name, (_, call) in found.items():  # the warm-up call of each, with its peak memory
        with PeakMemory() as memory:
            call()
        peaks[name] = memory.megabytes
    seconds = timed_rounds({name: call for name, (_, call) in found.items()}, rounds, warmup=0)

    def measured(name: str) -> Measurement:
        per_round = seconds[name]
        return Measurement(
            found[name][0],
            len(texts),
            megabytes,
            statistics.median(per_round),
            peak_mb=peaks[name],
            rounds=per_round,
        )

    ours = measured("dataclean")
    rows = [
        comparison("dedup signatures", note, ours, measured(name))
        for name in found
        if not name.startswith("dataclean")
    ]
    parts = {name: statistics.median(seconds[name]) for name in ("dataclean", "dataclean_normalize")}
    return rows, parts


def labeled_sample(docs: int, work: Path) -> tuple[list[str], list[str]]:
    """The first `docs` rows of bench_dedup's labeled corpus (built under `work` if needed)."""
    from benchmarks.bench_dedup import build_corpus

    folder = work / "corpus"
    if not any(folder.glob("*.parquet")):
        build_corpus(folder, max(docs, 20_000), 4)
    table = pa.concat_tables(pq.read_table(path) for path in sorted(folder.glob("*.parquet"))).slice(0, docs)
    return table.column("text").to_pylist(), table.column("lang").to_pylist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_signatures"))
    parser.add_argument("--json", type=Path, help="write the comparison rows here (for run_all)")
    data.add_data_argument(parser)
    args = parser.parse_args()
    data.use_data(args.data, args.generated)
    texts, langs = labeled_sample(args.docs, args.work)
    note = f"{len(texts):,} docs, {sum(len(t.encode()) for t in texts) / 1e6:.1f} MB of the labeled corpus"
    rows, parts = signature_rows(texts, langs, args.rounds, note)
    for row in rows:
        ours, theirs = row["dataclean"], row["reference"]
        print(
            f"{theirs['implementation']:58} {theirs['megabytes'] / theirs['seconds']:7.1f} MB/s   "
            f"dataclean {ours['megabytes'] / ours['seconds']:6.1f} MB/s   ratio "
            f"{describe([row['ratio_min'], row['ratio'], row['ratio_max']], 1, 'x')}"
        )
    share = parts["dataclean_normalize"] / parts["dataclean"]
    print(f"dataclean: normalization {share:.0%} of its time, shingle hashing and permutations the rest")
    if args.json:
        write_json(args.json, rows, dataclean_parts=parts)
    else:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
