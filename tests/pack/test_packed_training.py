"""Training on packed sequences: the dataset's items, and per-sample losses of packed batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from dataclean.executors.local import LocalExecutor  # noqa: E402
from dataclean.feedback.torch_utils import (  # noqa: E402
    PackedDataset,
    collate_packed,
    packed_attention_mask,
    per_sample_loss,
)
from dataclean.pack.run import pack_corpus  # noqa: E402
from dataclean.pack.tokenizer import BYTES, PackTokenizer  # noqa: E402
from tests.pack.helpers import cut_to_bytes, sample_paragraphs, write_run  # noqa: E402

SEQ_LEN = 256


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("packed")
    texts = [cut_to_bytes(p, 60) for p in sample_paragraphs()[:300]]
    run = write_run(folder / "run", texts, weights=[0.5 if i % 7 == 0 else 1.0 for i in range(len(texts))])
    pack_corpus(str(run), str(folder / "packed"), PackTokenizer(BYTES), SEQ_LEN, LocalExecutor())
    return folder / "packed"


def test_items_restart_positions_and_mask_sample_starts_and_padding(packed: Path) -> None:
    dataset = PackedDataset(packed)
    item = dataset[0]
    row = dataset.table.slice(0, 1).to_pylist()[0]
    starts, lengths = row["sample_starts"], row["sample_lengths"]
    assert item["sample_id"] == row["sample_ids"]
    assert item["input_ids"].tolist() == row["input_ids"]
    assert (item["position_ids"] == 0).sum() == len(starts)
    for k, (start, length) in enumerate(zip(starts, lengths, strict=True)):
        assert item["position_ids"][start : start + length].tolist() == list(range(length))
        assert item["labels"][start] == -100
        assert (
            item["labels"][start + 1 : start + length].tolist()
            == row["input_ids"][start + 1 : start + length]
        )
        assert set(item["sample_index"][start : start + length].tolist()) == {k}
        assert item["input_ids"][start + length - 1] == 256  # end-of-sample
    end = starts[-1] + lengths[-1]
    assert (item["labels"][end:] == -100).all() and (item["sample_index"][end:] == -1).all()
    assert item["weight"].tolist() == row["sample_weights"]


class TinyPackedLM(nn.Module):
    """A causal transformer whose attention is given as a mask and positions as ids."""

    def __init__(self, vocab: int = 258, width: int = 32, heads: int = 4, length: int = SEQ_LEN) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(length, width)
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens) + self.position(position_ids)
        batch, length, width = hidden.shape
        q, k, v = self.qkv(hidden).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        hidden = hidden + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        return self.head(hidden + self.mlp(hidden))


def test_packed_losses_equal_each_sample_alone(packed: Path) -> None:
    torch.manual_seed(0)
    model = TinyPackedLM().eval()
    dataset = PackedDataset(packed)
    batch = collate_packed([dataset[i] for i in range(4)])
    with torch.no_grad():
        logits = model(
            batch["input_ids"], batch["position_ids"], packed_attention_mask(batch["position_ids"])
        )
        losses, tokens = per_sample_loss(
            logits, batch["labels"], shift=True, return_tokens=True, position_ids=batch["position_ids"]
        )
        assert len(losses) == len(batch["sample_id"]) == len(batch["weight"])
        segment = 0
        for row in range(4):
            item = dataset[row]
            for k in range(int(item["sample_index"].max()) + 1):
                span = item["sample_index"] == k
                alone = item["input_ids"][span].unsqueeze(0)
                length = alone.shape[1]
                causal = torch.ones(length, length, dtype=torch.bool).tril()
                logits_alone = model(alone, torch.arange(length).unsqueeze(0), causal)
                expected = per_sample_loss(logits_alone, alone, shift=True)
                assert abs(float(losses[segment]) - float(expected[0])) < 1e-5
                assert int(tokens[segment]) == length - 1
                segment += 1
        assert segment == len(losses)


def tiny_llama(transformers: Any, layers: int, **options: Any) -> Any:
    """A randomly initialized Llama over the byte tokens (seeded)."""
    config = transformers.LlamaConfig(
        vocab_size=258,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=SEQ_LEN,
        **options,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def test_hugging_face_flattening_batches_log_per_sample(packed: Path) -> None:
    transformers = pytest.importorskip("transformers")
    model = tiny_llama(transformers, layers=2).eval()
    texts = [cut_to_bytes(p, 100) for p in sample_paragraphs()[:5]]
    features = [{"input_ids": list(t.encode("utf-8"))} for t in texts]
    batch = transformers.DataCollatorWithFlattening()(features, return_tensors="pt")
    with torch.no_grad():
        # Without a KV cache, transformers builds the block-diagonal mask from the position ids.
        logits = model(
            input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False
        ).logits
        losses = per_sample_loss(logits, batch["labels"], shift=True, position_ids=batch["position_ids"])
        assert len(losses) == len(texts)
        for k, feature in enumerate(features):
            alone = torch.tensor([feature["input_ids"]])
            expected = per_sample_loss(model(input_ids=alone).logits, alone, shift=True)
            assert abs(float(losses[k]) - float(expected[0])) < 1e-5


def test_quarantine_masks_listed_samples_inside_rows_and_skips_rows_left_empty(
    packed: Path, tmp_path: Path
) -> None:
    from dataclean.feedback.packed import PackedQuarantine
    from dataclean.feedback.sampler import QuarantinedDataset
    from dataclean.quarantine.lists import make_list, write_list

    dataset = PackedDataset(packed)
    listed = tmp_path / "quarantine.parquet"
    view = PackedQuarantine.from_dataset(dataset, listed)  # no list yet: nothing masked
    data = QuarantinedDataset(dataset, view)
    assert (data[0]["labels"] == dataset[0]["labels"]).all()
    first_row, second_row = dataset.sample_ids[0], dataset.sample_ids[1]
    entries = [
        {"sample_id": first_row[1]},
        {"sample_id": first_row[2], "action": "downweight", "weight": 0.2},
    ]
    entries += [{"sample_id": sample_id} for sample_id in second_row]  # all of row 1
    write_list(make_list(entries), listed)
    view.refresh()  # the sampler does this before each draw
    item = data[0]
    plain = dataset[0]
    masked = plain["sample_index"] == 1
    assert (item["labels"][masked] == -100).all()
    assert (item["labels"][~masked] == plain["labels"][~masked]).all()
    assert item["weight"][1] == 0.0 and abs(item["weight"][2] - 0.2 * plain["weight"][2].item()) < 1e-6
    assert view.excluded[1] and not view.excluded[0]
    drawn = list(data.sampler(shuffle=False))
    assert 1 not in drawn and len(drawn) == len(dataset) - 1
    # the loss of a masked sample is not counted: its segment scores no token
    batch = collate_packed([item])
    logits = torch.zeros(1, SEQ_LEN, 258)
    _, tokens = per_sample_loss(
        logits, batch["labels"], shift=True, return_tokens=True, position_ids=batch["position_ids"]
    )
    assert tokens[1] == 0 and tokens[0] > 0


def test_guarded_trainer_logs_every_sample_of_packed_batches(packed: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import pyarrow.dataset as ds

    from dataclean.feedback.guard import TrainingGuard
    from dataclean.feedback.guard_hf import GuardedTrainer
    from dataclean.feedback.packed import PackedQuarantine
    from dataclean.feedback.sampler import QuarantinedDataset

    dataset = PackedDataset(packed)
    guard = TrainingGuard(tmp_path / "guard")
    data = QuarantinedDataset(dataset, PackedQuarantine.from_dataset(dataset, guard.quarantine_path))

    arguments = transformers.TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        per_device_train_batch_size=2,
        max_steps=3,
        learning_rate=1e-3,
        remove_unused_columns=False,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = GuardedTrainer(
        model=tiny_llama(transformers, layers=1, use_cache=False),
        args=arguments,
        train_dataset=data,
        data_collator=collate_packed,
        guard=guard,
    )
    trainer.train()
    logged = ds.dataset(str(tmp_path / "guard" / "losses"), format="parquet").to_table().to_pylist()
    per_step: dict[int, list[str]] = {}
    for row in logged:
        per_step.setdefault(row["step"], []).append(row["sample_id"])
    assert len(per_step) == 3
    every_id = {i for row in dataset.sample_ids for i in row}
    for ids in per_step.values():
        assert len(ids) > 2 and set(ids) <= every_id  # several samples per packed row
        rows = [r for r in dataset.sample_ids if set(r) <= set(ids)]
        assert sum(len(r) for r in rows) == len(ids)  # whole rows, every sample of each
    assert all(row["tokens"] > 0 and row["loss"] > 0 for row in logged)
