"""`dataclean export megatron`: megatron-core's IndexedDataset reads back every document, the ids
file names them, and the bytes are the same on every executor and worker count."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from dataclean.executors.local import LocalExecutor
from dataclean.export.megatron.ids import ids_path, read_ids
from dataclean.export.megatron.run import export_megatron, work_folder
from dataclean.export.tokenizer import BYTES, PackTokenizer
from dataclean.quarantine.lists import make_list, write_list
from tests.export.megatron_helpers import export_run, megatron_datasets, paragraphs
from tests.pack.helpers import TOKENIZER, write_run


def expected_documents(texts: list[str], files: int) -> list[tuple[str, str]]:
    """(id, text) in export order: files by name (write_run deals rows round robin), rows in order."""
    return [(f"doc{r}", texts[r]) for k in range(files) for r in range(k, len(texts), files)]


def test_indexed_dataset_reads_back_every_byte_document(tmp_path: Path) -> None:
    datasets = megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    texts = paragraphs(40)
    prefix, summary = export_run(tmp_path, "bytes", texts)
    dataset = IndexedDataset(prefix)
    order = expected_documents(texts, 3)
    assert len(dataset) == len(order) == summary["documents"]
    assert dataset.index.dtype == np.uint16  # vocabulary 258 < 65,500: Megatron's choice
    assert datasets.indexed_dataset.DType.optimal_dtype(258) == np.uint16
    for k, (_, text) in enumerate(order):
        assert dataset[k].tolist() == [*text.encode("utf-8"), 256]
    ids = read_ids(ids_path(prefix), documents=len(order))
    assert ids.column("id").to_pylist() == [i for i, _ in order]
    assert ids.column("tokens").to_pylist() == [len(t.encode()) + 1 for _, t in order]
    assert summary["tokens"] == sum(len(t.encode()) + 1 for t in texts)


def test_a_tokenizer_json_export_holds_its_ids_plus_end_of_document(tmp_path: Path) -> None:
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    texts = paragraphs(30, start=100)
    prefix, summary = export_run(tmp_path, "bpe", texts, files=2, tokenizer=str(TOKENIZER))
    reference = Tokenizer.from_file(str(TOKENIZER))
    eod = reference.token_to_id("<|endoftext|>")
    dataset = IndexedDataset(prefix)
    assert dataset.index.dtype == np.uint16
    for k, (_, text) in enumerate(expected_documents(texts, 2)):
        assert dataset[k].tolist() == [*reference.encode(text, add_special_tokens=False).ids, eod]
    assert summary["end_of_document_id"] == eod


def test_a_large_vocabulary_is_written_as_int32(tmp_path: Path) -> None:
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    words = sorted({w for t in paragraphs(200) for w in t.split()})
    vocab = {"<|endoftext|>": 0, "[UNK]": 1} | {f"filler{k}": k + 2 for k in range(70_000)}
    vocab |= {w: 70_002 + k for k, w in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = tmp_path / "big.json"
    tokenizer.save(str(path))
    texts = paragraphs(20)
    prefix, _ = export_run(tmp_path, "big", texts, files=2, tokenizer=str(path))
    dataset = IndexedDataset(prefix)
    assert dataset.index.dtype == np.int32
    for k, (_, text) in enumerate(expected_documents(texts, 2)):
        assert dataset[k].tolist() == [*tokenizer.encode(text, add_special_tokens=False).ids, 0]
    assert max(int(dataset[k].max()) for k in range(len(dataset))) >= 70_002


def test_quarantine_leaves_listed_documents_out_and_counts_them(tmp_path: Path) -> None:
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    texts = paragraphs(24)
    listed = tmp_path / "list.parquet"
    entries: list[dict[str, Any]] = [
        {"sample_id": "doc3", "reason": "loss_spike", "action": "drop"},
        {"sample_id": "doc5", "reason": "high_loss", "action": "downweight", "weight": 0.25},
    ]
    write_list(make_list(entries), str(listed))
    prefix, summary = export_run(tmp_path, "q", texts, quarantine=str(listed))
    assert summary["quarantined"] == 1 and summary["rows_read"] == 24 and summary["documents"] == 23
    ids = read_ids(ids_path(prefix)).to_pylist()
    assert "doc3" not in {row["id"] for row in ids}
    assert {row["id"]: row["weight"] for row in ids}["doc5"] == 0.25
    order = [(i, t) for i, t in expected_documents(texts, 3) if i != "doc3"]
    dataset = IndexedDataset(prefix)
    assert [dataset[k].tolist() for k in range(len(dataset))] == [[*t.encode(), 256] for _, t in order]


def files_of(prefix: str) -> dict[str, bytes]:
    folder = Path(prefix).parent
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_byte_identical_on_local_ray_1_and_ray_2_workers(tmp_path: Path, ray_executor: Any) -> None:
    from dataclean.executors.ray import RayExecutor

    run = write_run(tmp_path / "run", paragraphs(60), files=5)
    outputs = {}
    for name, executor in [
        ("local", LocalExecutor()),
        ("ray2", ray_executor),
        ("ray1", RayExecutor(workers=1)),
    ]:
        prefix = str(tmp_path / name / "corpus")
        export_megatron(str(run), prefix, PackTokenizer(BYTES), executor)
        outputs[name] = {k: v for k, v in files_of(prefix).items() if not k.endswith(".json")}
        manifest = json.loads(Path(prefix + ".json").read_text())
        assert manifest["documents"] == 60
    assert set(outputs["local"]) == {"corpus.bin", "corpus.idx", "corpus.ids.parquet"}
    assert outputs["local"] == outputs["ray2"] == outputs["ray1"]


def test_per_shard_prefixes_are_listed_with_their_counts(tmp_path: Path) -> None:
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    texts = paragraphs(20)
    prefix, _ = export_run(tmp_path, "shards", texts, files=4, per_shard=True)
    manifest = json.loads(Path(prefix + ".json").read_text())
    assert [item["prefix"] for item in manifest["prefixes"]] == [f"{prefix}_{k:05d}" for k in range(4)]
    assert [item["documents"] for item in manifest["prefixes"]] == [5, 5, 5, 5]
    assert manifest["data_path"].split()[1::2] == [f"{prefix}_{k:05d}" for k in range(4)]
    for k, item in enumerate(manifest["prefixes"]):
        dataset = IndexedDataset(item["prefix"])
        rows = range(k, 20, 4)
        assert [dataset[j].tolist() for j in range(len(dataset))] == [[*texts[r].encode(), 256] for r in rows]
        assert read_ids(ids_path(item["prefix"])).column("id").to_pylist() == [f"doc{r}" for r in rows]
    assert not Path(work_folder(prefix)).exists()


def test_a_killed_export_resumes_to_the_same_bytes(tmp_path: Path) -> None:
    texts = paragraphs(3000, limit=2000)
    run = write_run(tmp_path / "run", texts, files=12)
    clean = str(tmp_path / "clean" / "corpus")
    export_megatron(str(run), clean, PackTokenizer(BYTES), LocalExecutor())
    killed = str(tmp_path / "killed" / "corpus")
    script = (
        "import time\n"
        "from dataclean.executors.local import LocalExecutor\n"
        "from dataclean.export.megatron.run import export_megatron\n"
        "from dataclean.export.tokenizer import PackTokenizer\n"
        "import dataclean.export.megatron.shards as shards\n"
        "call = shards.ExportShard.__call__\n"
        "def slow(self, item):\n"
        "    time.sleep(0.3)\n"
        "    return call(self, item)\n"
        "shards.ExportShard.__call__ = slow\n"
        f"export_megatron({str(run)!r}, {killed!r}, PackTokenizer('bytes'), LocalExecutor())\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script])
    work = Path(work_folder(killed))
    deadline = time.monotonic() + 120
    while len(list(work.glob("*.done.json"))) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.kill()
    process.wait()
    finished = len(list(work.glob("*.done.json")))
    assert 3 <= finished < 12 and not Path(killed + ".json").exists()
    lines: list[str] = []

    class Record:
        def step(self, text: str) -> None:
            lines.append(text)

        def files(self, total: int, skipped: int) -> None:
            lines.append(f"files {total} skipped {skipped}")

        def file_done(self, documents: int, tokens: int, text_bytes: int) -> None:
            lines.append("done")

    export_megatron(str(run), killed, PackTokenizer(BYTES), LocalExecutor(), progress=Record())
    assert f"files 12 skipped {finished}" in lines and lines.count("done") == 12 - finished
    assert {k: v for k, v in files_of(killed).items() if not k.endswith(".json")} == {
        k: v for k, v in files_of(clean).items() if not k.endswith(".json")
    }


def test_a_rerun_with_other_settings_refuses(tmp_path: Path) -> None:
    from dataclean.errors import ConfigError

    texts = paragraphs(10)
    prefix, _ = export_run(tmp_path, "again", texts)
    run = tmp_path / "again-run"
    same = export_megatron(str(run), prefix, PackTokenizer(BYTES), LocalExecutor())
    assert same["already_complete"]
    with pytest.raises(ConfigError, match="--overwrite"):
        export_megatron(str(run), prefix, PackTokenizer(str(TOKENIZER)), LocalExecutor())
    replaced = export_megatron(
        str(run), prefix, PackTokenizer(str(TOKENIZER)), LocalExecutor(), overwrite=True
    )
    assert replaced["tokenizer"]["vocab_size"] == 2048
    assert pq.read_table(ids_path(prefix)).num_rows == 10
