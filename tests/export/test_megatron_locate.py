"""`locate`: for random iterations and batch settings, the tokens megatron-core's GPTDataset and
BlendedDataset return for every sample are the concatenation of the spans `locate` names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from dataclean.errors import ConfigError, InputError
from dataclean.export.megatron.cache import Settings, load_cache, parse_data_path
from dataclean.export.megatron.locate import Batching, Locator
from tests.export.megatron_helpers import export_run, megatron_datasets, paragraphs

SEQ = 64


class ByteTokenizer:
    """What GPTDataset needs of a tokenizer: dataclean's bytes ids (256 end of document, 257 pad)."""

    eod = 256
    pad = 257
    vocab_size = 258
    unique_identifiers: ClassVar[dict[str, str]] = {"class": "dataclean-bytes"}


def build(
    prefixes: list[str], weights: list[float] | None, samples: int, cache: Path, seed: int = 1234
) -> Any:
    """The train dataset Megatron builds for `--data-path` (BlendedMegatronDatasetBuilder, CPU)."""
    megatron_datasets()
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    config = GPTDatasetConfig(
        random_seed=seed,
        sequence_length=SEQ,
        blend=(prefixes, weights),
        split="100,0,0",
        path_to_cache=str(cache),
        tokenizer=ByteTokenizer(),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
    )
    # weighted blends need a size for every split (as Megatron's training passes them)
    sizes = [samples, None, None] if weights is None else [samples, 0, 0]
    if len(prefixes) == 1:
        return BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()[0]
    # BlendedDataset asks torch.distributed for its rank: a one-process gloo group, as on one GPU
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{cache}.rendezvous", rank=0, world_size=1)
    try:
        return BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()[0]
    finally:
        dist.destroy_process_group()


def pretraining_sampler(total: int, micro: int, rank: int, dp: int) -> Iterator[list[int]]:
    """Megatron-LM's MegatronPretrainingSampler (megatron/training/datasets/data_samplers.py, not
    in the wheel), restated: consecutive chunks of micro x dp samples, rank r's slice of each."""
    batch: list[int] = []
    for index in range(total):
        batch.append(index)
        if len(batch) == micro * dp:
            yield batch[rank * micro : (rank + 1) * micro]
            batch = []


def megatron_tokens(dataset: Any, index: int) -> list[int]:
    """The seq_length + 1 tokens Megatron trains on for a sample: its inputs and the last label."""
    item = dataset[index]
    return [*item["tokens"].tolist(), int(item["labels"][-1])]


def check_iterations(
    dataset: Any, locator: Locator, texts: dict[str, str], batching: Batching, iterations: list[int]
) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    readers = [IndexedDataset(d.prefix) for d in locator.cache.datasets]
    micro, dp, size = int(batching.micro_batch_size or 1), batching.dp_size, batching.global_batch_size
    steps = size // (micro * dp)
    dealt = {}
    for rank in range(dp):
        for step, batch in enumerate(pretraining_sampler(max(iterations) * size, micro, rank, dp)):
            for row, g in enumerate(batch):
                dealt[g] = (rank, step % steps, row)
    for iteration in iterations:
        located = locator.iteration(iteration)
        assert [s.global_sample for s in located] == list(range((iteration - 1) * size, iteration * size))
        for sample in located:
            assert dealt[sample.global_sample] == (sample.rank, sample.micro_batch, sample.row)
            pieces = [
                readers[sample.dataset].get(span.document, offset=span.document_offset, length=span.length)
                for span in sample.spans
            ]
            assert np.concatenate(pieces).tolist() == megatron_tokens(dataset, sample.global_sample)
            assert [span.sample_offset for span in sample.spans] == list(
                np.cumsum([0] + [span.length for span in sample.spans])[:-1]
            )
            for span in sample.spans:
                assert span.id is not None
                data = texts[span.id].encode("utf-8")
                piece = data[span.document_offset : span.document_offset + span.length]
                assert span.text == piece.decode("utf-8", errors="replace")


@pytest.mark.parametrize(("global_batch", "micro", "dp"), [(8, 2, 2), (6, 1, 3), (12, 3, 1), (4, None, 4)])
def test_locate_names_the_tokens_of_every_sample_of_a_gpt_dataset(
    tmp_path: Path, global_batch: int, micro: int | None, dp: int
) -> None:
    texts = paragraphs(120)
    prefix, _ = export_run(tmp_path, "one", texts)
    iterations = 30
    dataset = build([prefix], None, iterations * global_batch, tmp_path / "cache")
    batching = Batching(global_batch, micro, dp)
    cache = load_cache(str(tmp_path / "cache"), Settings([prefix], None, SEQ))
    locator = Locator(cache, batching)
    rng = np.random.default_rng(global_batch * 10 + dp)
    chosen = sorted({1, iterations, *rng.integers(1, iterations + 1, size=4).tolist()})
    check_iterations(dataset, locator, {f"doc{k}": t for k, t in enumerate(texts)}, batching, chosen)


def test_locate_names_the_tokens_of_every_sample_of_a_two_prefix_blend(tmp_path: Path) -> None:
    first_texts, second_texts = paragraphs(80), paragraphs(60, start=900)
    first, _ = export_run(tmp_path, "first", first_texts, files=2)
    second, _ = export_run(tmp_path, "second", second_texts, files=2)
    prefixes, weights = parse_data_path(["0.3", first, "0.7", second])
    assert prefixes == [first, second] and weights == [0.3, 0.7]
    dataset = build(prefixes, weights, 16 * 20, tmp_path / "cache")
    own = [
        {f"doc{k}": t for k, t in enumerate(first_texts)},
        {f"doc{k}": t for k, t in enumerate(second_texts)},
    ]
    cache = load_cache(str(tmp_path / "cache"), Settings(prefixes, weights, SEQ))
    assert len(cache.datasets) == 2 and cache.dataset_index is not None
    locator = Locator(cache, Batching(16, 2, 4))
    served = set()
    for iteration in (1, 3, 11, 20):
        for sample in locator.iteration(iteration):
            assert int(dataset.dataset_index[sample.global_sample]) == sample.dataset
            served.add(sample.dataset)
            joined: list[int] = []
            for span in sample.spans:
                tokens = [*own[sample.dataset][str(span.id)].encode(), 256]
                joined += tokens[span.document_offset : span.document_offset + span.length]
            assert joined == megatron_tokens(dataset, sample.global_sample)
    assert served == {0, 1}


def test_a_cache_that_does_not_match_says_so(tmp_path: Path) -> None:
    texts = paragraphs(60)
    prefix, _ = export_run(tmp_path, "one", texts)
    build([prefix], None, 40, tmp_path / "cache")
    with pytest.raises(InputError, match="no GPTDataset for these settings"):
        load_cache(str(tmp_path / "cache"), Settings([prefix], None, SEQ * 2))
    with pytest.raises(InputError, match="no GPTDataset"):
        load_cache(str(tmp_path / "cache"), Settings([str(tmp_path / "other")], None, SEQ))
    # the prefix rewritten after Megatron built its cache (other texts, same path)
    from dataclean.executors.local import LocalExecutor
    from dataclean.export.megatron.run import export_megatron
    from dataclean.export.tokenizer import BYTES, PackTokenizer
    from tests.pack.helpers import write_run

    run = write_run(tmp_path / "changed-run", paragraphs(60, start=500), files=3)
    export_megatron(str(run), prefix, PackTokenizer(BYTES), LocalExecutor(), overwrite=True)
    with pytest.raises(InputError, match="does not match"):
        load_cache(str(tmp_path / "cache"), Settings([prefix], None, SEQ))
    cache_dir = tmp_path / "cache2"
    build([prefix], None, 40, cache_dir)
    cache = load_cache(str(cache_dir), Settings([prefix], None, SEQ))
    with pytest.raises(InputError, match="iteration 100 needs global samples"):
        Locator(cache, Batching(8)).iteration(100)


def test_batching_deals_positions_as_the_pretraining_sampler_and_maps_iterations() -> None:
    batching = Batching(12, 2, 3)
    dealt = {}
    for rank in range(3):
        for step, batch in enumerate(pretraining_sampler(12, 2, rank, 3)):
            for row, g in enumerate(batch):
                dealt[g] = (rank, step, row)
    assert [batching.placement(p) for p in range(12)] == [dealt[p] for p in range(12)]
    assert batching.first_sample(1) == 0 and batching.first_sample(5) == 48
    # a resumed run: the consumed samples Megatron logged at the iteration, minus the batch
    assert batching.first_sample(5, consumed_at=100) == 88
    assert Batching(8, None, 4).micro_batch_size == 2
    with pytest.raises(ConfigError, match="multiple of --micro-batch-size"):
        Batching(10, 2, 3)
    with pytest.raises(ConfigError, match="numbered from 1"):
        batching.first_sample(0)
    assert parse_data_path(["a"]) == (["a"], None)
    assert parse_data_path(["a", "b"]) == (["a", "b"], None)  # no weights: all prefixes
    assert parse_data_path(["1", "a", "3", "b"]) == (["a", "b"], [1.0, 3.0])
