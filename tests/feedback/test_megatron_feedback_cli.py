"""`dataclean feedback --steps TRAIN.LOG --megatron DATA_ARGS` end to end: Megatron-LM's log lines
with a planted data spike, an exported prefix whose cache megatron-core built, and the documents
listed for review are exactly those megatron-core's GPTDataset puts in that iteration."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from dataclean.cli import cli
from dataclean.quarantine.lists import read_list
from tests.export.megatron_helpers import export_run, megatron_datasets, paragraphs
from tests.export.test_megatron_locate import SEQ, build, megatron_tokens
from tests.feedback.test_megatron_feedback import write_training_log

SIZE, DP, MICRO = 4, 2, 1
SPIKE = 250  # write_training_log's data spike (330 is an fp16 overflow: never a data suspect)


def megatron_documents(dataset: Any, prefix: str, texts: list[str], first: int) -> set[str]:
    """The ids of the documents megatron-core's GPTDataset puts in the global batch of SIZE
    samples from `first` (its `_query_document_sample_shuffle_indices`), each document checked
    against its text with megatron-core's IndexedDataset."""
    megatron_datasets()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    reader = IndexedDataset(prefix)
    found: set[str] = set()
    for g in range(first, first + SIZE):
        tokens, documents = dataset._query_document_sample_shuffle_indices(g)
        assert tokens.tolist() == megatron_tokens(dataset, g)
        for document in documents.tolist():
            assert reader[document].tolist() == [*texts[document].encode("utf-8"), 256]
            found.add(f"doc{document}")  # write_run names row r `doc{r}`; one input file keeps the order
    return found


def setup(tmp_path: Path, consumed_before: int = 0) -> tuple[str, Any, list[str], Path, Path]:
    """An exported run whose corpus carries ppl and quality, megatron-core's cache for 400
    iterations of 4 samples, and Megatron's log with the planted spikes."""
    texts = paragraphs(60)
    prefix, _ = export_run(tmp_path, "one", texts, files=1)
    dataset = build([prefix], None, 400 * SIZE + consumed_before, tmp_path / "cache")
    data = tmp_path / "one-run" / "data" / "part-00000.parquet"
    table = pq.read_table(data)
    rng = np.random.default_rng(3)
    table = table.append_column("lang", pa.array(["en"] * table.num_rows))
    table = table.append_column("ppl", pa.array(rng.uniform(10, 900, table.num_rows)))
    table = table.append_column("quality_bucket", pa.array(rng.integers(0, 20, table.num_rows), pa.int8()))
    pq.write_table(table, data)
    log = tmp_path / "train.log"
    write_training_log(log, batch=SIZE, consumed_before=consumed_before)
    return prefix, dataset, texts, log, tmp_path / "one-run"


def options(prefix: str, cache: Path) -> str:
    words = ["--data-path", prefix, "--cache-dir", str(cache), "--seq-length", str(SEQ)]
    words += ["--global-batch-size", str(SIZE), "--micro-batch-size", str(MICRO), "--dp-size", str(DP)]
    return shlex.join(words)


def expected_suspicion(corpus: Path) -> dict[str, float]:
    """The ranking signal restated from the corpus: the share of rows with a lower ppl (one
    language here) and 1 - quality_bucket / 19, averaged."""
    rows = pq.read_table(corpus / "data").to_pylist()
    ppl = np.array([r["ppl"] for r in rows])
    return {r["id"]: ((ppl < r["ppl"]).sum() / len(ppl) + 1 - r["quality_bucket"] / 19) / 2 for r in rows}


def test_feedback_lists_the_documents_of_the_data_spike_for_review(tmp_path: Path) -> None:
    prefix, dataset, texts, log, corpus = setup(tmp_path)
    out = tmp_path / "feedback"
    arguments = ["feedback", "--steps", str(log), "--megatron", options(prefix, tmp_path / "cache")]
    result = CliRunner().invoke(cli, [*arguments, "--corpus", str(corpus), "-o", str(out)])
    assert result.exit_code == 0, result.output

    listed = read_list(out / "quarantine.parquet").to_pylist()
    assert {row["sample_id"] for row in listed} == megatron_documents(
        dataset, prefix, texts, (SPIKE - 1) * SIZE
    )
    assert {row["reason"] for row in listed} == {f"megatron_data_spike:iteration_{SPIKE}"}
    assert all(row["action"] == "review" and row["first_step"] == SPIKE for row in listed)
    truth = {row["id"]: row for row in pq.read_table(corpus / "data").to_pylist()}
    assert all(row["text"] == truth[row["sample_id"]]["text"] and row["text_hash"] for row in listed)
    suspicion = expected_suspicion(corpus)
    scores = [row["score"] for row in listed]
    assert scores == sorted(scores, reverse=True)  # the list is in rank order
    assert all(abs(row["score"] - suspicion[row["sample_id"]]) < 1e-12 for row in listed)

    spikes = {s["step"]: s["diagnosis"] for s in json.loads((out / "spikes.json").read_text())}
    assert spikes == {SPIKE: "data", 330: "fp16_overflow"}
    report = (out / "report.md").read_text()
    assert f"megatron_data_spike:iteration_{SPIKE}" in report and "listed for review" in report
    assert "are for review" in result.output


def position_owners(dataset: Any, g: int) -> np.ndarray:
    """The document of each of a sample's seq_length + 1 tokens, from megatron-core's own arrays:
    its documents (`_query_document_sample_shuffle_indices`), the first one's offset
    (`sample_index`) and the documents' lengths (`IndexedDataset.sequence_lengths`)."""
    _, documents = dataset._query_document_sample_shuffle_indices(g)
    offset = int(dataset.sample_index[int(dataset.shuffle_index[g])][1])
    spans = dataset.dataset.sequence_lengths[documents].astype(np.int64)
    spans[0] -= offset
    spans[-1] = SEQ + 1 - spans[:-1].sum()
    return np.repeat(documents, spans)


def test_feedback_ranks_the_suspects_by_their_megatron_losses(tmp_path: Path) -> None:
    from dataclean.feedback.megatron import TokenLossRecorder
    from tests.export.test_megatron_locate import pretraining_sampler

    prefix, dataset, texts, log, corpus = setup(tmp_path)
    first = (SPIKE - 1) * SIZE
    culprit = int(position_owners(dataset, first)[SEQ // 2])
    # the loss_func hook's files for the spike's iteration: the loss at position p predicts token
    # p + 1; tokens of the culprit document cost 12, the others about 4 (a little more per byte value)
    for rank in range(DP):
        recorder = TokenLossRecorder(tmp_path / "token_losses")
        for batch in pretraining_sampler(SIZE, MICRO, rank, DP):
            rows = []
            for g in batch:
                owner = position_owners(dataset, first + g)[1:]
                labels = dataset[first + g]["labels"].numpy()
                rows.append(np.where(owner == culprit, 12.0, 4.0 + labels / 1000))
            losses_of_batch = np.stack(rows).astype(np.float32)
            recorder.record(losses_of_batch, np.ones_like(losses_of_batch), first, rank, DP, MICRO)
    runner = CliRunner()
    losses = tmp_path / "losses.parquet"
    words = shlex.split(options(prefix, tmp_path / "cache"))
    made = runner.invoke(
        cli, ["megatron", "losses", str(tmp_path / "token_losses"), *words, "-o", str(losses)]
    )
    assert made.exit_code == 0, made.output
    data_file = tmp_path / "data-args.txt"
    data_file.write_text("# the run's data arguments\n" + options(prefix, tmp_path / "cache") + "\n")
    out = tmp_path / "feedback"
    arguments = ["feedback", "--steps", str(log), "--losses", str(losses), "--megatron", f"@{data_file}"]
    result = runner.invoke(cli, [*arguments, "--corpus", str(corpus), "-o", str(out)])
    assert result.exit_code == 0, result.output

    spikes = {s["step"]: s["diagnosis"] for s in json.loads((out / "spikes.json").read_text())}
    assert spikes == {SPIKE: "data", 330: "fp16_overflow"}
    listed = {row["sample_id"]: row for row in read_list(out / "quarantine.parquet").to_pylist()}
    assert set(listed) == megatron_documents(dataset, prefix, texts, (SPIKE - 1) * SIZE)
    # feedback's own analysis convicts the culprit from the losses (dropped, as before); the rest
    # of the iteration's documents are suspects for review, in the order of their loss
    assert listed[f"doc{culprit}"]["action"] == "drop"
    suspects = [row for row in listed.values() if row["reason"] == f"megatron_data_spike:iteration_{SPIKE}"]
    assert {row["sample_id"] for row in suspects} == set(listed) - {f"doc{culprit}"}
    assert all(row["action"] == "review" for row in suspects)
    loss = {r["sample_id"]: r["loss"] for r in pq.read_table(losses).to_pylist()}
    assert [row["score"] for row in suspects] == sorted(
        (loss[i] for i in listed if i != f"doc{culprit}"), reverse=True
    )


def test_megatron_options_are_checked_like_locate_s(tmp_path: Path) -> None:
    prefix, _, _, log, _ = setup(tmp_path)
    runner = CliRunner()
    out = str(tmp_path / "feedback")
    missing = runner.invoke(
        cli, ["feedback", "--steps", str(log), "--megatron", "--seq-length 64", "-o", out]
    )
    assert missing.exit_code != 0 and "--megatron: Missing option '--data-path'" in missing.output
    no_log = runner.invoke(cli, ["feedback", "--megatron", options(prefix, tmp_path / "cache"), "-o", out])
    assert no_log.exit_code != 0 and "--megatron needs --steps" in no_log.output
    other = options(prefix, tmp_path / "cache").replace(f"--seq-length {SEQ}", "--seq-length 32")
    stale = runner.invoke(cli, ["feedback", "--steps", str(log), "--megatron", other, "-o", out])
    assert stale.exit_code != 0 and "error:" in stale.output


def test_a_resumed_run_s_iteration_starts_at_its_logged_consumed_samples(tmp_path: Path) -> None:
    before = 3 * SIZE + 2  # consumed before this log's iteration 1 (another batch size earlier)
    prefix, dataset, texts, log, _ = setup(tmp_path, consumed_before=before)
    out = tmp_path / "feedback"
    arguments = ["feedback", "--steps", str(log), "--megatron", options(prefix, tmp_path / "cache")]
    result = CliRunner().invoke(cli, [*arguments, "-o", str(out)])
    assert result.exit_code == 0, result.output
    listed = read_list(out / "quarantine.parquet").to_pylist()
    first = before + SPIKE * SIZE - SIZE  # Megatron's consumed count at the spike, less one batch
    assert {row["sample_id"] for row in listed} == megatron_documents(dataset, prefix, texts, first)
    assert all(row["score"] is None for row in listed)  # no losses, no corpus: unranked
    other = options(prefix, tmp_path / "cache").replace(
        f"--global-batch-size {SIZE}", "--global-batch-size 2"
    )
    refused = CliRunner().invoke(cli, ["feedback", "--steps", str(log), "--megatron", other, "-o", str(out)])
    assert refused.exit_code != 0 and "global batch size 4 at iteration 250" in refused.output
