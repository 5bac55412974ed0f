"""`dataclean megatron filter`: megatron-core's IndexedDataset reads back exactly the documents the
quarantine list does not drop, matched by id or by text hash, without retokenizing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean.export.megatron.filter import filter_prefix
from dataclean.export.megatron.ids import IDS_SCHEMA, ids_path, read_ids, write_ids
from dataclean.ids import text_hash
from dataclean.quarantine.lists import make_list, write_list
from tests.export.megatron_helpers import export_run, megatron_datasets, paragraphs


def write_quarantine(path: Path, entries: list[dict[str, Any]]) -> str:
    write_list(make_list(entries), str(path))
    return str(path)


def test_filter_keeps_exactly_the_unlisted_documents(tmp_path: Path) -> None:
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    texts = paragraphs(30)
    prefix, _ = export_run(tmp_path, "full", texts, files=1)
    listed = write_quarantine(
        tmp_path / "list.parquet",
        [
            {"sample_id": "doc3", "reason": "loss_spike", "action": "drop"},
            # an id that changed since: matched by the text's hash
            {
                "sample_id": "renamed",
                "text_hash": text_hash(texts[7]),
                "reason": "loss_spike",
                "action": "drop",
            },
            {"sample_id": "doc9", "reason": "high_loss", "action": "downweight", "weight": 0.5},
            {"sample_id": "doc11", "reason": "suspect", "action": "review"},
        ],
    )
    new = str(tmp_path / "filtered" / "corpus")
    (tmp_path / "filtered").mkdir()
    summary = filter_prefix(prefix, listed, new)
    assert summary["left_out"] == 2 and summary["documents"] == 28 and summary["downweighted"] == 1
    kept = [k for k in range(30) if k not in (3, 7)]
    dataset = IndexedDataset(new)
    assert [dataset[j].tolist() for j in range(len(dataset))] == [[*texts[k].encode(), 256] for k in kept]
    ids = read_ids(ids_path(new), documents=28)
    assert ids.column("id").to_pylist() == [f"doc{k}" for k in kept]
    assert (
        dict(zip(ids.column("id").to_pylist(), ids.column("weight").to_pylist(), strict=True))["doc9"] == 0.5
    )
    assert summary["tokens_left_out"] == len(texts[3].encode()) + len(texts[7].encode()) + 2


def test_a_preprocess_data_prefix_with_sentences_filters_by_a_user_ids_file(tmp_path: Path) -> None:
    """A prefix as `preprocess_data.py --split-sentences` writes it (several sequences per document,
    written with megatron-core's IndexedDatasetBuilder), with an ids file the user made."""
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

    rng = np.random.default_rng(3)
    documents = [
        [rng.integers(0, 1000, size=int(n)).tolist() for n in rng.integers(1, 9, size=int(k))]
        for k in rng.integers(1, 5, size=12)
    ]
    prefix = str(tmp_path / "pre")
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=np.uint16)
    for sentences in documents:
        builder.add_document(np.array([t for s in sentences for t in s]), [len(s) for s in sentences])
    builder.finalize(prefix + ".idx")
    ids = pa.table(
        {
            "document": pa.array(np.arange(12), pa.int64()),
            "id": [f"row{k}" for k in range(12)],
            "text_hash": pa.nulls(12, pa.string()),
            "weight": pa.array(np.ones(12)),
            "tokens": pa.array([sum(len(s) for s in d) for d in documents], pa.int64()),
        },
        schema=IDS_SCHEMA,
    )
    write_ids(str(tmp_path / "user.ids.parquet"), ids)
    listed = write_quarantine(
        tmp_path / "list.parquet",
        [{"sample_id": f"row{k}", "reason": "x", "action": "drop"} for k in (0, 5, 11)],
    )
    new = str(tmp_path / "out")
    summary = filter_prefix(prefix, listed, new, ids_file=str(tmp_path / "user.ids.parquet"))
    kept = [k for k in range(12) if k not in (0, 5, 11)]
    assert summary["left_out"] == 3
    original, filtered = IndexedDataset(prefix), IndexedDataset(new)
    assert len(filtered.document_indices) - 1 == len(kept)
    for j, k in enumerate(kept):
        first, last = filtered.document_indices[j], filtered.document_indices[j + 1]
        assert [filtered[s].tolist() for s in range(first, last)] == documents[k]
        o_first, o_last = original.document_indices[k], original.document_indices[k + 1]
        assert [original[s].tolist() for s in range(o_first, o_last)] == documents[k]
