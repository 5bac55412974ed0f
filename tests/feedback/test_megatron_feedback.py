"""Megatron-LM's iteration log lines as a step log (a planted spike found and diagnosed), per-token
losses split into per-document losses, and a data spike's documents listed for review."""

# The log lines are built with Megatron-LM's own format calls, copied as they are.
# ruff: noqa: UP032

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dataclean.export.megatron.cache import Settings, load_cache
from dataclean.export.megatron.locate import Batching, Locator
from dataclean.feedback.detectors import Spike
from dataclean.feedback.logs import read_step_log
from dataclean.feedback.megatron import TokenLossRecorder, document_losses, step_spikes, suspects
from dataclean.feedback.megatron_log import read_megatron_steps
from tests.export.megatron_helpers import export_run, paragraphs
from tests.export.test_megatron_locate import SEQ, build, pretraining_sampler


def megatron_line(
    iteration: int,
    consumed: int,
    lr: float,
    loss: float,
    scale: float,
    grad: float,
    skipped: int = 0,
    batch: int = 32,
) -> str:
    """One line as Megatron-LM's training_log (megatron/training/training.py) builds it."""
    log_string = " [2026-12-02 12:00:00.123456]"
    log_string += " iteration {:8d}/{:8d} |".format(iteration, 400)
    log_string += " consumed samples: {:12d} |".format(consumed)
    log_string += " elapsed time per iteration (ms): {:.1f} |".format(1234.5)
    log_string += f" learning rate: {lr:.6E} |"
    log_string += f" global batch size: {batch:5d} |"
    log_string += " {}: {:.6E} |".format("lm loss", loss)
    log_string += f" loss scale: {scale:.1f} |"
    log_string += f" grad norm: {grad:.3f} |"
    log_string += " number of skipped iterations: {:3d} |".format(skipped)
    log_string += " number of nan iterations: {:3d} |".format(0)
    return log_string


def write_training_log(path: Path, batch: int = 32, consumed_before: int = 0) -> None:
    """400 iterations: a smooth loss, warm-up then cosine lr, steady grad norm; at 250 a spike
    with nothing wrong in the optimizer (data), at 330 one where the fp16 loss scale halves.
    `batch`: the global batch size; `consumed_before`: samples consumed before iteration 1 (as
    a run resumed from one with another batch size logs them)."""
    rng = np.random.default_rng(5)
    lines = ["using world size: 8, data-parallel size: 4", "WARNING: something harmless"]
    for it in range(1, 401):
        loss = 4.0 + 6.0 * math.exp(-it / 80) + rng.normal(0, 0.02)
        lr = 3e-4 * min(1.0, it / 50) * (0.5 + 0.5 * math.cos(math.pi * max(0, it - 50) / 700))
        grad, scale, skipped = 1.0 + rng.normal(0, 0.05), 65536.0, 0
        if it == 250:
            loss = 9.5
        if it == 330:
            loss, scale, skipped = 9.0, 32768.0, 1
        if it >= 331:
            scale = 32768.0
        prefix = "[default0]:" if it % 7 == 0 else ""
        consumed = consumed_before + it * batch
        lines.append(prefix + megatron_line(it, consumed, lr, loss, scale, grad, skipped, batch))
        if it % 100 == 0:
            lines.append(f"(min, max) time across ranks (ms): save-checkpoint ...: ({it}.0, {it}.5)")
    path.write_text("\n".join(lines) + "\n")


def test_megatron_log_lines_are_a_step_log_and_the_planted_spikes_are_diagnosed(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    write_training_log(log)
    parsed = read_megatron_steps(log)
    assert parsed.num_rows == 400
    row = parsed.slice(329, 1).to_pylist()[0]
    assert row["step"] == 330 and row["loss"] == 9.0 and row["loss_scale"] == 32768.0
    assert (
        row["consumed_samples"] == 330 * 32
        and row["global_batch_size"] == 32
        and row["skipped_iterations"] == 1
    )
    steps = read_step_log(log)  # the feedback's own reader, through its Megatron hook
    assert steps.table.num_rows == 400 and steps.missing == []
    assert any("1 skipped iterations" in note for note in steps.notes)
    spikes = {spike.step: spike for spike in step_spikes(steps.table)}
    assert set(spikes) == {250, 330}
    assert spikes[250].diagnosis == "data"
    assert spikes[330].diagnosis == "fp16_overflow"


def stream(prefix_texts: list[str], document_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The token stream Megatron samples from (documents in document_index order) and, per
    position, its document, built from the texts themselves."""
    tokens, owners = [], []
    for document in document_index.tolist():
        data = [*prefix_texts[document].encode(), 256]
        tokens += data
        owners += [document] * len(data)
    return np.array(tokens), np.array(owners)


def test_document_losses_and_suspects_of_a_data_spike(tmp_path: Path) -> None:
    texts = paragraphs(90)
    prefix, _ = export_run(tmp_path, "one", texts, files=1)
    size, micro, dp, iterations = 8, 2, 2, 12
    dataset = build([prefix], None, iterations * size, tmp_path / "cache")
    cache = load_cache(str(tmp_path / "cache"), Settings([prefix], None, SEQ))
    locator = Locator(cache, Batching(size, micro, dp), with_text=False)
    folder = tmp_path / "losses"
    # the hook as Megatron would call it: per rank, micro-batches in order; the "loss" of each
    # position is the label token itself, so the truth is a mean of known tokens
    for rank in range(dp):
        recorder = TokenLossRecorder(folder)
        for step, batch in enumerate(pretraining_sampler(iterations * size, micro, rank, dp)):
            consumed = (step // (size // (micro * dp))) * size
            labels = np.stack([dataset[g]["labels"].numpy() for g in batch])
            recorder.record(labels, np.ones_like(labels), consumed, rank, dp, micro)
    losses = document_losses(folder, locator)
    gpt = cache.datasets[0]
    flat, owner = stream(texts, np.asarray(gpt.document_index))
    truth: dict[tuple[str, int], list[int]] = {}
    for g in range(iterations * size):
        t = int(gpt.shuffle_index[g])
        positions = np.arange(t * SEQ + 1, t * SEQ + SEQ + 1)
        assert flat[positions].tolist() == dataset[g]["labels"].tolist()  # the stream is Megatron's
        for position in positions.tolist():
            truth.setdefault((f"doc{owner[position]}", g // size + 1), []).append(int(flat[position]))
    got = {(r["sample_id"], r["step"]): (r["loss"], r["tokens"]) for r in losses.to_pylist()}
    assert set(got) == set(truth)
    for key, values in truth.items():
        assert got[key][1] == len(values) and abs(got[key][0] - float(np.mean(values))) < 1e-9

    spike_iteration = 7  # a data spike there, as step_spikes diagnoses one (test above)
    spikes = [Spike(step=spike_iteration, loss=9.5, level=3.0, diagnosis="data")]
    spikes.append(Spike(step=9, loss=9.0, level=3.0, diagnosis="fp16_overflow"))  # never convicts data
    listed = suspects(spikes, locator, losses=losses).to_pylist()
    expected = {doc for (doc, it) in truth if it == spike_iteration}
    first = (spike_iteration - 1) * size
    t0 = [int(gpt.shuffle_index[g]) for g in range(first, first + size)]
    expected |= {f"doc{owner[t * SEQ]}" for t in t0}  # a sample's first token is in it too
    assert {row["sample_id"] for row in listed} == expected
    assert all(row["action"] == "review" and row["first_step"] == spike_iteration for row in listed)
    scores = [row["score"] for row in listed]
    assert None not in scores and scores == sorted(scores, reverse=True)
    assert scores[0] == max(got[(row["sample_id"], spike_iteration)][0] for row in listed)


def test_the_suspects_command_lists_the_documents_of_the_data_spike_only(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dataclean.cli import cli
    from dataclean.quarantine.lists import read_list

    texts = paragraphs(60)
    prefix, _ = export_run(tmp_path, "one", texts, files=1)
    build([prefix], None, 400 * 4, tmp_path / "cache")
    log = tmp_path / "train.log"
    write_training_log(log, batch=4)
    options = ["--data-path", prefix, "--cache-dir", str(tmp_path / "cache"), "--seq-length", str(SEQ)]
    options += ["--global-batch-size", "4", "--dp-size", "2"]
    result = CliRunner().invoke(
        cli, ["megatron", "suspects", str(log), *options, "-o", str(tmp_path / "list.parquet")]
    )
    assert result.exit_code == 0, result.output
    assert "iteration 250" in result.output and "data" in result.output and "fp16_overflow" in result.output
    cache = load_cache(str(tmp_path / "cache"), Settings([prefix], None, SEQ))
    located = Locator(cache, Batching(4, None, 2), with_text=False).iteration(250)
    expected = {span.id for sample in located for span in sample.spans}
    listed = read_list(str(tmp_path / "list.parquet")).to_pylist()
    assert {row["sample_id"] for row in listed} == expected
    assert {row["reason"] for row in listed} == {"megatron_data_spike:iteration_250"}
