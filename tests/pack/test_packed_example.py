"""The feedback example's packed run: packed training logs one loss per sample of every row, and a
data spike inside packed rows is diagnosed `data` with exactly its corrupt records (the whole
example, with its precision and recall target, is the slow test). Needs torch."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")

from dataclean.executors.local import LocalExecutor
from dataclean.pack.run import pack_corpus
from dataclean.pack.tokenizer import BYTES, PackTokenizer
from tests.conftest import FIXTURE_ROOT, ROOT

EXAMPLE = ROOT / "examples" / "feedback_loop"
FIXTURE = FIXTURE_ROOT / "feedback" / "paragraphs.jsonl"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import corpus
    import packed

    yield packed, corpus
    for name in ("run", "train", "corpus", "packed"):
        sys.modules.pop(name, None)


def packed_folder(tmp_path: Path, name: str, ids: list[str], texts: list[str]) -> Path:
    (tmp_path / name / "data").mkdir(parents=True)
    pq.write_table(pa.table({"id": ids, "text": texts}), tmp_path / name / "data" / "part-00000.parquet")
    output = tmp_path / f"{name}_packed"
    pack_corpus(str(tmp_path / name), str(output), PackTokenizer(BYTES), 512, LocalExecutor(), seed=None)
    return output


def test_packed_training_logs_every_sample_and_the_spike(tmp_path: Path, example: tuple[Any, Any]) -> None:
    packed, corpus = example
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    train = packed_folder(tmp_path, "run", [r["id"] for r in rows], [r["text"][:250] for r in rows])
    records = [(i, text[:150]) for i, text in corpus.spike_records(6)]
    spike = packed_folder(tmp_path, "spike", [i for i, _ in records], [t for _, t in records])
    curve = packed.train_packed(train, tmp_path / "logs", epochs=2, inject={3: spike})
    assert len(curve["loss"]) == 2 * (len(pq.read_table(train / "part-00000.parquet")) // packed.BATCH_ROWS)
    losses = ds.dataset(tmp_path / "logs" / "losses", format="parquet").to_table()
    per_epoch = losses.filter(pc.equal(losses.column("epoch"), 0)).column("sample_id").to_pylist()
    at_spike = losses.filter(pc.equal(losses.column("step"), 3)).column("sample_id").to_pylist()
    assert [i for i in at_spike if i.startswith("corrupt")] == [i for i, _ in records]
    assert len(set(per_epoch) - {i for i, _ in records}) >= len(rows) - 2 * packed.BATCH_ROWS
    assert (pc.min(losses.column("tokens")).as_py() or 0) > 0


@pytest.mark.slow
def test_the_packed_example_meets_its_target(tmp_path: Path, example: tuple[Any, Any]) -> None:
    packed, _ = example
    figures = packed.first_pass(tmp_path / "work")
    assert figures["spike"] == 1.0 and figures["guard"] == 1.0
    assert figures["precision"] >= 0.9 and figures["recall"] >= 0.9, figures
