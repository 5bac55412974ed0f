"""Which documents, and which token spans of them, Megatron trained on in an iteration.

The arithmetic (docs/megatron.md has it with the checks that hold it to megatron-core):

1. Iteration `I` of a run that started from zero consumed samples with global batch `G` holds the
   global samples `(I - 1) * G ... I * G - 1` (`consumed` samples logged at `I`, minus `G`, when
   the batch size changed or the run was resumed with another one: `consumed_at`).
2. Megatron's pretraining sampler deals them in micro-batch steps of `M * D` samples (`M` the
   micro-batch size, `D` the data-parallel size): in step `k`, rank `r` gets positions
   `k * M * D + r * M ... + M - 1` of the global batch.
3. A blend sends global sample `g` to dataset `dataset_index[g]`, its sample
   `dataset_sample_index[g]`; a single GPTDataset serves `g` itself.
4. A GPTDataset's sample `s` is `t = shuffle_index[s]`; it runs from `sample_index[t]` to
   `sample_index[t + 1]`, each a (position in `document_index`, token offset) pair, and covers
   `seq_length + 1` tokens (the last one only a label) of the documents `document_index[p]` for
   the positions `p` between: the first from its offset, the last up to its offset + 1, those
   between whole; exactly what `GPTDataset._query_document_sample_shuffle_indices` reads.
5. `document_index` holds sequence indices of the IndexedDataset; a prefix that dataclean wrote
   has one sequence per document, and `PREFIX.ids.parquet` names each document's sample id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dataclean.errors import ConfigError, InputError
from dataclean.export.megatron.cache import Cache, GPTIndices
from dataclean.export.megatron.ids import ids_metadata, ids_path, read_ids
from dataclean.export.megatron.indexed import TokenReader, index_digest
from dataclean.io.files import exists


@dataclass
class Batching:
    """The run's batch settings: global batch, micro-batch and data-parallel size."""

    global_batch_size: int
    micro_batch_size: int | None = None
    dp_size: int = 1

    def __post_init__(self) -> None:
        micro = self.micro_batch_size
        if self.global_batch_size < 1 or self.dp_size < 1 or (micro is not None and micro < 1):
            raise ConfigError("--global-batch-size, --micro-batch-size and --dp-size must be positive")
        if micro is None:
            if self.global_batch_size % self.dp_size:
                raise ConfigError("--global-batch-size must be a multiple of --dp-size")
            self.micro_batch_size = self.global_batch_size // self.dp_size
        elif self.global_batch_size % (micro * self.dp_size):
            raise ConfigError(
                f"--global-batch-size {self.global_batch_size} is not a multiple of --micro-batch-size "
                f"x --dp-size ({micro} x {self.dp_size}), as Megatron requires"
            )

    def first_sample(self, iteration: int, consumed_at: int | None = None) -> int:
        """The first global sample of an iteration (numbered from 1, as Megatron's log numbers
        them); `consumed_at`: the consumed samples Megatron logged at that iteration."""
        if iteration < 1:
            raise ConfigError(f"--iteration: iterations are numbered from 1, got {iteration}")
        if consumed_at is not None:
            return consumed_at - self.global_batch_size
        return (iteration - 1) * self.global_batch_size

    def placement(self, position: int) -> tuple[int, int, int]:
        """(data-parallel rank, micro-batch step, position in the micro-batch) of a position of
        the global batch, as Megatron's pretraining sampler deals them."""
        micro = int(self.micro_batch_size or 1)
        step, rest = divmod(position, micro * self.dp_size)
        rank, row = divmod(rest, micro)
        return rank, step, row


@dataclass
class Span:
    """A piece of one document inside one sample."""

    id: str | None
    document: int
    sequence: int
    document_offset: int
    length: int
    sample_offset: int
    text: str | None = None


@dataclass
class LocatedSample:
    """One global sample of an iteration: where it went and what it holds."""

    iteration: int
    global_sample: int
    rank: int
    micro_batch: int
    row: int
    dataset: int
    prefix: str
    dataset_sample: int
    shuffled_sample: int
    spans: list[Span] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "spans": [dict(span.__dict__) for span in self.spans]}


def sample_spans(
    dataset: GPTIndices, sample: int, extra_token: bool = True
) -> tuple[int, list[tuple[int, int, int]]]:
    """The shuffled sample and (sequence, offset, length) of every piece of a GPTDataset sample,
    as `GPTDataset._query_document_sample_shuffle_indices` reads them."""
    if not 0 <= sample < dataset.samples:
        raise InputError(
            dataset.prefix, f"its GPTDataset has {dataset.samples:,} samples, not sample {sample:,}"
        )
    shuffled = int(dataset.shuffle_index[sample])
    first, first_offset = (int(v) for v in dataset.sample_index[shuffled])
    last, last_offset = (int(v) for v in dataset.sample_index[shuffled + 1])
    extra = int(extra_token)
    lengths = dataset.index.sequence_lengths
    pieces = []
    for position in range(first, last + 1):
        sequence = int(dataset.document_index[position])
        offset = first_offset if position == first else 0
        end = last_offset + extra if position == last else int(lengths[sequence])
        pieces.append((sequence, offset, end - offset))
    return shuffled, pieces


class Locator:
    """Names the documents of global samples from a loaded cache (`cache.load_cache`), with each
    prefix's ids file and, when a tokenizer can be had, the text of every span."""

    def __init__(self, cache: Cache, batching: Batching, decode: Any = None, with_text: bool = True) -> None:
        self.cache = cache
        self.batching = batching
        self.readers = [TokenReader(d.prefix, d.index) for d in cache.datasets]
        self.ids: list[list[str] | None] = []
        self.decoders: list[Any] = []
        for dataset in cache.datasets:
            path = ids_path(dataset.prefix)
            table = None
            if exists(path):
                digest = index_digest(dataset.prefix)
                table = read_ids(path, documents=dataset.index.documents, idx_digest=digest)
            self.ids.append(None if table is None else table.column("id").to_pylist())
            if not with_text:
                self.decoders.append(None)
            elif decode is not None:
                self.decoders.append(decode)
            else:
                self.decoders.append(decoder_of(ids_metadata(table) if table is not None else {}))

    def iteration(self, iteration: int, consumed_at: int | None = None) -> list[LocatedSample]:
        first = self.batching.first_sample(iteration, consumed_at)
        return self.samples(iteration, first, range(self.batching.global_batch_size))

    def samples(self, iteration: int, first: int, positions: range) -> list[LocatedSample]:
        """The located samples at `positions` of the global batch that starts at sample `first`."""
        globals_ = np.arange(first, first + len(positions), dtype=np.int64)
        if len(globals_) and (globals_[0] < 0 or globals_[-1] >= self.cache.samples):
            raise InputError(
                str(self.cache.description.path.parent),
                f"iteration {iteration} needs global samples {globals_[0]:,}-{globals_[-1]:,}; the cache "
                f"holds {self.cache.samples:,} (check --global-batch-size and --iteration against the run)",
            )
        datasets, dataset_samples = self.cache.resolve(globals_)
        located = []
        for position, g, k, s in zip(positions, globals_, datasets, dataset_samples, strict=True):
            rank, step, row = self.batching.placement(position)
            located.append(self._locate(iteration, int(g), rank, step, row, int(k), int(s)))
        return located

    def _locate(
        self, iteration: int, g: int, rank: int, step: int, row: int, k: int, s: int
    ) -> LocatedSample:
        dataset = self.cache.datasets[k]
        shuffled, pieces = sample_spans(dataset, s)
        result = LocatedSample(iteration, g, rank, step, row, k, dataset.prefix, s, shuffled)
        boundaries = dataset.index.document_indices
        in_sample = 0
        for sequence, offset, length in pieces:
            document = int(np.searchsorted(boundaries, sequence, side="right") - 1)
            before = int(dataset.index.sequence_lengths[boundaries[document] : sequence].sum())
            ids = self.ids[k]
            span = Span(
                ids[document] if ids else None, document, sequence, before + offset, length, in_sample
            )
            decoder = self.decoders[k]
            if decoder is not None:
                span.text = decoder(self.readers[k].sequence(sequence, offset, length))
            result.spans.append(span)
            in_sample += length
        return result


def decoder_of(metadata: dict[str, Any]) -> Any:
    """A function from tokens to text for the tokenizer an ids file records, or None."""
    spec = (metadata.get("tokenizer") or {}).get("spec")
    if spec == "bytes":
        return decode_bytes
    if spec and exists(spec):
        from dataclean.export.tokenizer import PackTokenizer

        return TokenizerDecoder(PackTokenizer(spec))
    return None


def decode_bytes(tokens: np.ndarray) -> str:
    """The byte tokenizer's text: bytes 0-255 as UTF-8 (a cut character shows as U+FFFD), the
    end-of-document id as nothing."""
    values = np.asarray(tokens)
    return bytes(values[values < 256].astype(np.uint8)).decode("utf-8", errors="replace")


@dataclass
class TokenizerDecoder:
    """A tokenizer.json's decode, special tokens kept (the end of a document shows)."""

    tokenizer: Any

    def __call__(self, tokens: np.ndarray) -> str:
        loaded = self.tokenizer._tokenizer()
        return str(loaded.decode([int(t) for t in tokens], skip_special_tokens=False))
