"""The guard in a real Hugging Face `Trainer` run: a tiny GPT-2 (built from a config, no download)
on the CPU, garbage samples injected in one batch (skipped with torch/transformers missing)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from dataclean.feedback.guard import TrainingGuard  # noqa: E402
from dataclean.feedback.guard_hf import GuardedTrainer  # noqa: E402
from dataclean.feedback.monitor import SpikeMonitor  # noqa: E402
from dataclean.feedback.sampler import DatasetQuarantine, QuarantinedDataset  # noqa: E402
from dataclean.quarantine.lists import read_list  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

# One thread: on a shared 2-core machine torch's thread pool spins against other processes and
# a tiny model trains 20x slower with two threads than with one.
torch.set_num_threads(1)

VOCAB, LENGTH, BATCH, SPIKE_STEP = 32, 16, 8, 40
JUNK_SLOTS = (1, 4, 6)
JUNK_IDS = [f"junk-{k}" for k in range(len(JUNK_SLOTS))]


def items(count: int = 480) -> list[dict]:
    """Samples of a small language (next token = previous + 1 or 2), garbage at step 30's batch."""
    rng = np.random.default_rng(1)
    starts = rng.integers(0, VOCAB, count)
    steps = np.cumsum(1 + rng.integers(0, 2, (count, LENGTH - 1)), axis=1)
    rows = (starts[:, None] + np.concatenate([np.zeros((count, 1), int), steps], axis=1)) % VOCAB
    out = [{"sample_id": f"s{k:04d}", "input_ids": r} for k, r in enumerate(rows)]
    for slot, junk_id in zip(JUNK_SLOTS, JUNK_IDS, strict=True):
        out.insert(
            SPIKE_STEP * BATCH + slot, {"sample_id": junk_id, "input_ids": rng.integers(0, VOCAB, LENGTH)}
        )
    return out


def collate(features: list[dict]) -> dict:
    ids = torch.tensor(np.stack([f["input_ids"] for f in features]), dtype=torch.long)
    return {
        "input_ids": ids,
        "labels": ids.clone(),
        "sample_id": [f["sample_id"] for f in features],
        "weight": torch.tensor([f["weight"] for f in features]),
    }


def trainer_for(tmp_path, guard, max_steps):
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=LENGTH, n_embd=32, n_layer=1, n_head=2, resid_pdrop=0, embd_pdrop=0
    )
    model = transformers.GPT2LMHeadModel(config)
    data = items()
    view = DatasetQuarantine([d["sample_id"] for d in data], guard.quarantine_path)
    arguments = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=BATCH,
        max_steps=max_steps,
        learning_rate=2e-2,
        lr_scheduler_type="constant",
        logging_steps=1000,
        save_strategy="steps",
        save_steps=10,
        remove_unused_columns=False,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    return GuardedTrainer(
        model=model,
        args=arguments,
        train_dataset=QuarantinedDataset(data, view),
        data_collator=collate,
        guard=guard,
        sampler_options={"shuffle": False},
    )


def test_guard_callback_catches_the_data_spike_in_a_trainer_and_stops(tmp_path):
    guard = TrainingGuard(
        tmp_path / "guard", action={"data": "stop"}, monitor=SpikeMonitor(window=20, warmup=15)
    )
    trainer = trainer_for(tmp_path, guard, max_steps=50)
    before = {}

    class Snapshot(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == SPIKE_STEP:
                before.update({k: v.clone() for k, v in kwargs["model"].state_dict().items()})

    trainer.add_callback(Snapshot())
    trainer.train()
    assert trainer.state.global_step == SPIKE_STEP + 1  # stopped right after the spike step
    assert [(i.step, i.diagnosis) for i in guard.incidents] == [(SPIKE_STEP, "data")], guard.incidents
    incident = guard.incidents[0]
    assert sorted(incident.blamed) == JUNK_IDS
    assert sorted(read_list(guard.quarantine_path).column("sample_id").to_pylist()) == JUNK_IDS
    assert incident.grad_norm is not None and incident.lr == pytest.approx(2e-2)
    assert incident.checkpoint.endswith("checkpoint-40") and incident.checkpoint_step == 40
    assert incident.resume_lr == pytest.approx([2e-3, 6e-3])
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the spike step changed nothing
    assert not (tmp_path / "out" / "checkpoint-41").exists()
    record = json.loads((tmp_path / "guard" / "incidents.jsonl").read_text())
    assert record["action"] == "stop" and len(record["sample_ids"]) == BATCH

    # Resume from the checkpoint before the spike with the list in place: the garbage never returns.
    resumed_guard = TrainingGuard(tmp_path / "guard", monitor=SpikeMonitor(window=20, warmup=15), log=False)
    resumed = trainer_for(tmp_path, resumed_guard, max_steps=50)
    drawn: list[str] = []
    record_batch = resumed.guard_callback.record

    def spy(sample_ids, losses, tokens):
        drawn.extend(sample_ids)
        record_batch(sample_ids, losses, tokens)

    resumed.guard_callback.record = spy
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-40"))
    assert drawn and not set(drawn) & set(JUNK_IDS)
    assert resumed_guard.incidents == []


def test_the_hugging_face_example_writes_the_logs_dataclean_feedback_reads(tmp_path, monkeypatch):
    # examples/feedback_loop/hf_trainer.py on real text (the bundled sample's Wikipedia rows): the
    # guard logs every sample drawn at every step, and `dataclean feedback` reads its logs.

    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from dataclean.cli import cli

    root = ROOT
    texts = pq.read_table(root / "dataclean" / "data" / "sample" / "wiki.parquet").column("text")
    ids = [f"wiki-{k}" for k in range(len(texts))]
    corpus = tmp_path / "out" / "data"
    corpus.mkdir(parents=True)
    pq.write_table(pa.table({"id": ids, "text": texts}), corpus / "part-0.parquet")
    monkeypatch.syspath_prepend(str(root / "examples" / "feedback_loop"))
    import hf_trainer

    logs = tmp_path / "logs"
    hf_trainer.main(tmp_path / "out", logs, steps=6)
    losses = ds.dataset(logs / "losses").to_table()
    steps = ds.dataset(logs / "steps").to_table()
    assert losses.num_rows == 6 * 16 and set(losses.column("sample_id").to_pylist()) <= set(ids)
    assert steps.num_rows == 6 and len(set(losses.column("step").to_pylist())) == 6
    assert np.isfinite(losses.column("loss").to_numpy()).all()
    command = ["feedback", "--losses", str(logs / "losses"), "--steps", str(logs / "steps")]
    command += ["--corpus", str(tmp_path / "out"), "-o", str(tmp_path / "feedback")]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "feedback" / "quarantine.parquet").exists()
