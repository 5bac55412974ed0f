"""The commands: `dataclean export megatron`, `dataclean megatron locate --json` and `filter`,
through the CLI, on a GPTDataset cache megatron-core built; `dataclean export pack` is `pack`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dataclean.cli import cli
from dataclean.export.megatron.ids import ids_path, read_ids
from dataclean.quarantine.lists import make_list, write_list
from tests.export.megatron_helpers import megatron_datasets, paragraphs
from tests.export.test_megatron_locate import SEQ, build, megatron_tokens
from tests.pack.helpers import write_run


def test_export_locate_and_filter_from_the_command_line(tmp_path: Path) -> None:
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    texts = paragraphs(50)
    run = write_run(tmp_path / "run", texts, files=2)
    prefix = str(tmp_path / "out" / "corpus")
    runner = CliRunner()
    result = runner.invoke(
        cli, ["export", "megatron", str(run), "-o", prefix, "--tokenizer", "bytes", "--executor", "local"]
    )
    assert result.exit_code == 0, result.output
    assert "50 documents" in result.output and f"--data-path {prefix}" in result.output
    assert "1/2 files" in result.stderr and "2/2 files" in result.stderr

    dataset = build([prefix], None, 10 * 4, tmp_path / "cache")
    common = ["megatron", "locate", "--data-path", prefix, "--cache-dir", str(tmp_path / "cache")]
    common += ["--seq-length", str(SEQ), "--global-batch-size", "4", "--dp-size", "2"]
    result = runner.invoke(cli, [*common, "--iteration", "5", "--json"])
    assert result.exit_code == 0, result.output
    samples = json.loads(result.stdout)
    assert [s["global_sample"] for s in samples] == [16, 17, 18, 19]
    assert [(s["rank"], s["micro_batch"], s["row"]) for s in samples] == [
        (0, 0, 0),
        (0, 0, 1),
        (1, 0, 0),
        (1, 0, 1),
    ]
    by_id = {f"doc{k}": t for k, t in enumerate(texts)}
    for sample in samples:
        joined: list[int] = []
        for span in sample["spans"]:
            tokens = [*by_id[span["id"]].encode(), 256]
            joined += tokens[span["document_offset"] : span["document_offset"] + span["length"]]
        assert joined == megatron_tokens(dataset, sample["global_sample"])
    result = runner.invoke(cli, [*common, "--iterations", "2-3"])
    assert result.exit_code == 0 and result.output.count("iteration ") == 8
    result = runner.invoke(cli, [*common[:-4], "--global-batch-size", "4", "--iteration", "500"])
    assert result.exit_code != 0 and "iteration 500 needs global samples" in result.output
    result = runner.invoke(cli, [*common[:6], "--seq-length", "99", *common[8:], "--iteration", "1"])
    assert result.exit_code != 0 and "no GPTDataset for these settings" in result.output

    first_id = samples[0]["spans"][0]["id"]
    listed = tmp_path / "list.parquet"
    write_list(make_list([{"sample_id": first_id, "reason": "loss_spike", "action": "drop"}]), str(listed))
    new = str(tmp_path / "out" / "filtered")
    result = runner.invoke(cli, ["megatron", "filter", prefix, "--quarantine", str(listed), "-o", new])
    assert result.exit_code == 0, result.output
    assert "49 of 50 documents, 1 left out" in result.output
    assert len(IndexedDataset(new)) == 49
    assert first_id not in read_ids(ids_path(new)).column("id").to_pylist()


def test_export_pack_is_the_pack_command_with_the_shared_progress(tmp_path: Path) -> None:
    from dataclean.export.cli import export
    from dataclean.pack.cli import pack

    assert export.commands["pack"] is pack
    run = write_run(tmp_path / "run", paragraphs(20), files=2)
    out = str(tmp_path / "packed")
    arguments = [str(run), "-o", out, "--tokenizer", "bytes", "--seq-len", "512", "--executor", "local"]
    result = CliRunner().invoke(cli, ["export", "pack", *arguments])
    assert result.exit_code == 0, result.output
    assert "pack: 1/2 files" in result.stderr and "pack: 2/2 files, 20 documents" in result.stderr
    assert "20 samples" in result.stdout
