"""`dataclean megatron filter`: a prefix without the documents a quarantine list drops, no retokenizing.

The ids file says which sample each document is; the list's `drop` entries are matched by `id`,
else by `text_hash` (the rule of the pipeline's quarantine stage; near-duplicate matching needs the
texts, which a tokenized prefix no longer has: `dataclean run --quarantine` and a new export do
that). The kept documents' tokens are copied in order into `NEWPREFIX.bin`, their sequences into
`NEWPREFIX.idx` (a document made of several sequences, as `preprocess_data.py --split-sentences`
writes, stays whole), and the kept rows, renumbered, into `NEWPREFIX.ids.parquet`; `downweight`
entries lower the recorded weight. A prefix that `tools/preprocess_data.py` wrote works the same
with an ids file the user made (`document`, `id` and, to match by hash, `text_hash`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from dataclean import __version__
from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.export.megatron.ids import DOCUMENT, digest, ids_metadata, ids_path, read_ids, write_ids
from dataclean.export.megatron.indexed import (
    TokenReader,
    bin_path,
    idx_path,
    index_digest,
    read_index,
    write_index,
)
from dataclean.io.files import atomic_output, exists
from dataclean.io.writers import write_json
from dataclean.quarantine.lists import applied, read_list
from dataclean.quarantine.match import DROP, QuarantineIndex, lowered_weights

COPY_TOKENS = 8 << 20


def filter_prefix(
    prefix: str, quarantine: str, new_prefix: str, ids_file: str | None = None, overwrite: bool = False
) -> dict[str, Any]:
    """Copy `prefix` to `new_prefix` without the documents `quarantine` drops; returns the counts
    (also written to NEWPREFIX.json)."""
    if new_prefix == prefix:
        raise ConfigError("-o: the new prefix must differ from the one filtered")
    if not overwrite and (exists(bin_path(new_prefix)) or exists(idx_path(new_prefix))):
        raise ConfigError(f"{new_prefix}.bin/.idx exist: pass --overwrite to replace them")
    index = read_index(prefix)
    ids = read_ids(ids_file or ids_path(prefix), documents=index.documents, idx_digest=index_digest(prefix))
    listed = QuarantineIndex.from_list(applied(read_list(quarantine)), near_duplicates=False)
    hashes = ids.column(C.TEXT_HASH).to_pylist() if C.TEXT_HASH in ids.column_names else None
    matches = listed.match(ids.column(C.ID).to_pylist(), hashes)
    keep = np.array([m is None or m.action != DROP for m in matches], dtype=bool)
    weights = ids.column(C.WEIGHT).to_numpy(zero_copy_only=False) if C.WEIGHT in ids.column_names else None
    weights = lowered_weights(np.ones(ids.num_rows) if weights is None else np.array(weights, float), matches)

    starts, ends = index.document_indices[:-1], index.document_indices[1:]
    kept_documents = np.flatnonzero(keep)
    sequence_counts = (ends - starts)[kept_documents]
    kept_sequences = _ranges(starts[kept_documents], sequence_counts)
    lengths = index.sequence_lengths[kept_sequences].astype(np.int64)
    reader = TokenReader(prefix, index)
    _copy_sequences(reader, kept_sequences, new_prefix)
    boundaries = np.r_[0, np.cumsum(sequence_counts)].astype(np.int64)
    index_data = write_index(idx_path(new_prefix), lengths, index.dtype, boundaries)

    table = ids.filter(pa.array(keep))
    table = table.set_column(
        table.schema.get_field_index(DOCUMENT), DOCUMENT, pa.array(np.arange(table.num_rows))
    )
    for name, values in ((C.WEIGHT, pa.array(weights[keep])), ("tokens", pa.array(_tokens(index)[keep]))):
        if name in table.column_names:
            table = table.set_column(table.schema.get_field_index(name), name, values)
        else:
            table = table.append_column(name, values)
    if C.TEXT_HASH not in table.column_names:
        table = table.append_column(C.TEXT_HASH, pa.nulls(table.num_rows, pa.string()))
    metadata = {**ids_metadata(ids), "idx_sha256": digest(index_data), "filtered_from": prefix}
    write_ids(ids_path(new_prefix), table, metadata)
    summary = {
        "prefixes": [{"prefix": new_prefix, "documents": int(keep.sum()), "tokens": int(lengths.sum())}],
        "source": prefix,
        "quarantine": quarantine,
        "documents_read": int(index.documents),
        "documents": int(keep.sum()),
        "left_out": int((~keep).sum()),
        "tokens_left_out": int(_tokens(index)[~keep].sum()),
        "downweighted": int(sum(1 for m in matches if m is not None and m.action != DROP)),
        "dataclean_version": __version__,
    }
    write_json(new_prefix + ".json", summary)
    return summary


def _tokens(index: Any) -> np.ndarray:
    tokens: np.ndarray = index.document_lengths()
    return tokens


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The integers start .. start + count - 1 of every (start, count), concatenated."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total)


def _copy_sequences(reader: TokenReader, sequences: np.ndarray, new_prefix: str) -> None:
    """The kept sequences' tokens, in order, into NEWPREFIX.bin: contiguous runs copied as one
    slice of the memory map, in chunks of at most COPY_TOKENS tokens."""
    index = reader.index
    itemsize = index.dtype.itemsize
    firsts = index.sequence_pointers[sequences] // itemsize
    lasts = firsts + index.sequence_lengths[sequences]
    breaks = np.flatnonzero(firsts[1:] != lasts[:-1]) + 1  # where a run of adjacent sequences ends
    run_starts = firsts[np.r_[0, breaks]] if len(sequences) else np.zeros(0, np.int64)
    run_ends = lasts[np.r_[breaks - 1, len(sequences) - 1]] if len(sequences) else np.zeros(0, np.int64)
    tokens = reader.tokens
    with atomic_output(bin_path(new_prefix)) as sink:
        for start, end in zip(run_starts.tolist(), run_ends.tolist(), strict=True):
            for chunk in range(start, end, COPY_TOKENS):
                sink.write(np.asarray(tokens[chunk : min(end, chunk + COPY_TOKENS)]).tobytes())
