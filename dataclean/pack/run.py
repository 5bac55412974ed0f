"""`dataclean pack`: a run's kept rows -> fixed-length training sequences of whole samples.

Three maps on the executor with one barrier between the first two, like dedup's: encode each
input file (`dataclean.pack.encode`), plan the packing of the whole corpus on the driver from
the lengths (`dataclean.pack.packer`), scatter every file's token spans to the output files they
belong to and gather each output file (`dataclean.pack.write`). Samples keep their input order
(files by name, rows in order) as their index, so the plan, and with it every output byte, is
the same on any executor and worker count. Scratch files live in PACKED/_work until the end.
"""

from __future__ import annotations

import posixpath
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from dataclean import __version__
from dataclean.errors import ConfigError
from dataclean.export.progress import ExportProgress, Silent
from dataclean.export.source import input_files
from dataclean.io.files import fresh_folder, make_dirs, remove_tree
from dataclean.io.shards import filesystem
from dataclean.io.writers import write_json
from dataclean.pack.encode import EncodeFile, EncodeResult, Listed
from dataclean.pack.packer import plan_packing
from dataclean.pack.tokenizer import PackTokenizer
from dataclean.pack.write import GatherSequences, ScatterSpans, Spans, part_name, piece_name

PACK_JSON = "pack.json"
ROWS_PER_FILE = 4096  # sequences per output file: 32 MB of int32 tokens at 2,048


def _empty(folder: str) -> bool:
    fs, path = filesystem(folder)
    return not fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))


def pack_corpus(
    run_folder: str,
    output: str,
    tokenizer: PackTokenizer,
    seq_len: int,
    executor: Any,
    seed: int | None = 0,
    quarantine: str | None = None,
    rows_per_file: int = ROWS_PER_FILE,
    overwrite: bool = False,
    progress: ExportProgress | None = None,
) -> dict[str, Any]:
    """Tokenize and pack `run_folder`'s kept rows into `output`; returns what pack.json holds.
    `progress` hears of each input file tokenized and of the later steps (the exporters' shared
    `dataclean.export.progress`)."""
    progress = progress if progress is not None else Silent()
    if seq_len < 2:
        raise ConfigError(f"--seq-len: must be at least 2, got {seq_len}")
    if rows_per_file < 1:
        raise ConfigError(f"--rows-per-file: must be at least 1, got {rows_per_file}")
    sources = input_files(run_folder)
    if not overwrite and not _empty(output):
        raise ConfigError(f"{output} exists and is not empty: pass --overwrite to replace it")
    fresh_folder(output)
    work = posixpath.join(output, "_work")
    tokens_folder, pieces_folder = posixpath.join(work, "tokens"), posixpath.join(work, "pieces")
    make_dirs(tokens_folder)
    make_dirs(pieces_folder)
    scratch = [posixpath.join(tokens_folder, f"f{i:05d}.parquet") for i in range(len(sources))]
    listed = Listed.read(quarantine) if quarantine else None
    items = list(zip(sources, scratch, strict=True))
    progress.files(len(items), 0)
    progress.step(f"tokenizing {len(items)} files ({getattr(executor, 'workers', 1)} workers)")

    def report(_: int, result: EncodeResult) -> None:
        progress.file_done(len(result.lengths), int(result.lengths.sum()), result.text_bytes)

    encoded: list[EncodeResult] = executor.map(EncodeFile(tokenizer, listed), items, on_result=report)
    progress.step("planning the packing")

    lengths = np.concatenate([r.lengths for r in encoded]) if encoded else np.zeros(0, np.int64)
    first_sample = np.concatenate([[0], np.cumsum([len(r.lengths) for r in encoded], dtype=np.int64)])
    plan = plan_packing(lengths, seq_len, seed)

    by_sample = np.argsort(plan.sample, kind="stable")
    bounds = np.searchsorted(plan.sample[by_sample], first_sample)
    jobs = []
    for source in range(len(sources)):
        take = by_sample[bounds[source] : bounds[source + 1]]
        if len(take):
            jobs.append(
                Spans(
                    source=source,
                    path=scratch[source],
                    row=plan.sample[take] - first_sample[source],
                    offset=plan.offset[take],
                    length=plan.length[take],
                    sequence=plan.sequence[take],
                    start=plan.start[take],
                )
            )
    progress.step(f"writing {plan.sequences:,} sequences")
    scattered: list[list[int]] = executor.map(ScatterSpans(pieces_folder, rows_per_file), jobs)
    pieces: dict[int, list[str]] = {}
    for spans, parts_of_job in zip(jobs, scattered, strict=True):
        for part in parts_of_job:
            pieces.setdefault(part, []).append(piece_name(pieces_folder, part, spans.source))
    parts = (plan.sequences + rows_per_file - 1) // rows_per_file
    gather = [
        (part, min(rows_per_file, plan.sequences - part * rows_per_file), sorted(pieces[part]))
        for part in range(parts)
    ]
    executor.map(GatherSequences(output, rows_per_file, seq_len, tokenizer.padding_id), gather)
    remove_tree(work)

    tokens = int(lengths.sum())
    slots = plan.sequences * seq_len
    summary: dict[str, Any] = {
        "sequences": plan.sequences,
        "tokens": tokens,
        "samples": len(lengths),
        "padding_fraction": (slots - tokens) / slots if slots else 0.0,
        "split_samples": plan.split_samples,
        "tokenizer": tokenizer.describe(),
        "seq_len": seq_len,
        "seed": seed,
        "rows_read": sum(r.rows for r in encoded),
        "quarantined": sum(r.quarantined for r in encoded),
        "quarantine": quarantine,
        "input": run_folder,
        "files": [posixpath.basename(part_name(output, p)) for p in range(parts)],
        "dataclean_version": __version__,
    }
    write_json(posixpath.join(output, PACK_JSON), summary)
    return summary
