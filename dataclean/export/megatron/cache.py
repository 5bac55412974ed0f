"""The index files Megatron's datasets saved in their cache folder, found and checked.

megatron-core's `GPTDataset` saves, in `path_to_cache` (Megatron-LM's `--data-cache-path`):

    {hash}-GPTDataset-{split}-description.txt      JSON of the dataset's unique identifiers
    {hash}-GPTDataset-{split}-document_index.npy   int32: sequence indices, shuffled, per epoch
    {hash}-GPTDataset-{split}-sample_index.npy     (samples + 1, 2): where each sample starts, as
                                                   (position in document_index, token offset)
    {hash}-GPTDataset-{split}-shuffle_index.npy    a permutation of the samples

where `hash` is the MD5 of the description; a `BlendedDataset` saves its description (holding its
datasets' identifiers, weights and size) with `dataset_index.npy` (int16: which dataset serves
each global sample) and `dataset_sample_index.npy` (int64: which sample of it). This module
finds the top-level dataset of a `--data-path` and split among the descriptions, never by
rebuilding anything, and checks the files against the prefixes: every sample must start exactly
`seq_length` tokens after the previous one in the documents' token stream, so a prefix rewritten
after Megatron built its cache, or another sequence length, is an error that says so.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dataclean.errors import ConfigError, InputError
from dataclean.export.megatron.indexed import Index, read_index

DESCRIPTION = "description.txt"


def parse_data_path(values: list[str]) -> tuple[list[str], list[float] | None]:
    """Megatron's `--data-path` words as `get_blend_from_list` reads them: prefixes, or weights
    and prefixes in turn (an odd count, or any weight that is not a number: all prefixes)."""
    if not values:
        raise ConfigError("--data-path: give the prefixes (and weights) the run was given")
    if len(values) % 2 == 1:
        return list(values), None
    try:
        weights = [float(values[i]) for i in range(0, len(values), 2)]
    except ValueError:
        return list(values), None
    return [values[i].strip() for i in range(1, len(values), 2)], weights


@dataclass
class Description:
    """One description file: its identifiers, the class, split and hash in its name."""

    path: Path
    hash: str
    kind: str
    split: str
    identifiers: dict[str, Any]

    def array(self, name: str) -> np.ndarray:
        path = self.path.with_name(f"{self.hash}-{self.kind}-{self.split}-{name}.npy")
        if not path.exists():
            raise InputError(str(path), "missing: the cache folder holds the description but not this index")
        array: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
        return array


def read_descriptions(cache_dir: str) -> list[Description]:
    """Every dataset description in a cache folder, each checked against the hash in its name."""
    folder = Path(cache_dir)
    if not folder.is_dir():
        raise InputError(cache_dir, "not a folder: give Megatron's --data-cache-path")
    found = []
    for path in sorted(folder.glob(f"*-{DESCRIPTION}")):
        parts = path.name[: -len(DESCRIPTION) - 1].split("-")
        if len(parts) != 3:
            continue
        text = path.read_text(encoding="utf-8")
        if hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() != parts[0]:
            raise InputError(str(path), "its content does not hash to its name: edited or not Megatron's")
        found.append(Description(path, parts[0], parts[1], parts[2], json.loads(text)))
    if not found:
        raise InputError(cache_dir, "holds no Megatron dataset descriptions (*-description.txt)")
    return found


def _same_path(recorded: Any, prefix: str) -> bool:
    return isinstance(recorded, str) and os.path.abspath(recorded) == os.path.abspath(prefix)


@dataclass
class Settings:
    """The run's settings that pick its dataset out of a cache folder."""

    prefixes: list[str]
    weights: list[float] | None
    seq_length: int
    split: str = "train"
    seed: int | None = None
    split_string: str | None = None
    samples: int | None = None

    def gpt_matches(self, identifiers: dict[str, Any], prefix: str) -> bool:
        checks = [
            identifiers.get("class") == "GPTDataset",
            _same_path(identifiers.get("dataset_path"), prefix),
            identifiers.get("index_split") == self.split,
            identifiers.get("sequence_length") == self.seq_length,
            self.seed is None or identifiers.get("random_seed") == self.seed,
            self.split_string is None
            or str(identifiers.get("split", "")).replace(" ", "") == self.split_string.replace(" ", ""),
        ]
        return all(checks)


@dataclass
class GPTIndices:
    """One GPTDataset's saved indices and the prefix they index."""

    prefix: str
    description: Description
    index: Index
    document_index: np.ndarray
    sample_index: np.ndarray
    shuffle_index: np.ndarray

    @property
    def samples(self) -> int:
        return len(self.shuffle_index)


@dataclass
class Cache:
    """A run's top-level dataset: its GPTDatasets and, for a blend, which serves each sample."""

    datasets: list[GPTIndices]
    dataset_index: np.ndarray | None
    dataset_sample_index: np.ndarray | None
    description: Description

    @property
    def samples(self) -> int:
        return len(self.dataset_index) if self.dataset_index is not None else self.datasets[0].samples

    def resolve(self, global_samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dataset, sample of that dataset) of each global sample index."""
        if self.dataset_index is None or self.dataset_sample_index is None:
            return np.zeros(len(global_samples), np.int64), np.asarray(global_samples, np.int64)
        return (
            np.asarray(self.dataset_index[global_samples], np.int64),
            np.asarray(self.dataset_sample_index[global_samples], np.int64),
        )


def _pick(
    candidates: list[Description], what: str, settings: Settings, size_key: str, cache_dir: str
) -> Description:
    if settings.samples is not None:
        sized = [c for c in candidates if c.identifiers.get(size_key) == settings.samples]
        candidates = sized or candidates
    if not candidates:
        raise InputError(
            cache_dir,
            f"holds no {what} for these settings (split {settings.split}, --seq-length "
            f"{settings.seq_length}, seed {settings.seed}): not the cache of this --data-path, "
            "or other settings",
        )
    if len(candidates) > 1:
        sizes = ", ".join(f"{c.hash} ({size_key} {c.identifiers.get(size_key)})" for c in candidates)
        raise ConfigError(
            f"{cache_dir} holds {len(candidates)} {what}s for these settings: {sizes}; "
            "pass --train-samples (or --train-iters) as the run did"
        )
    return candidates[0]


def load_cache(cache_dir: str, settings: Settings) -> Cache:
    """The run's dataset in `cache_dir`, checked against its prefixes (module docstring)."""
    descriptions = read_descriptions(cache_dir)
    if len(settings.prefixes) == 1 and settings.weights is None:
        candidates = [d for d in descriptions if settings.gpt_matches(d.identifiers, settings.prefixes[0])]
        chosen = _pick(candidates, "GPTDataset", settings, "num_samples", cache_dir)
        return Cache([_gpt(chosen, settings.prefixes[0], settings)], None, None, chosen)
    blends = []
    for description in descriptions:
        ids = description.identifiers
        parts = ids.get("datasets") or []
        if (
            ids.get("class") == "BlendedDataset"
            and ids.get("split") == settings.split
            and len(parts) == len(settings.prefixes)
            and all(settings.gpt_matches(p, x) for p, x in zip(parts, settings.prefixes, strict=True))
            and (settings.weights is None or _same_weights(ids.get("weights"), settings.weights))
        ):
            blends.append(description)
    chosen = _pick(blends, "BlendedDataset", settings, "size", cache_dir)
    datasets = []
    for part, prefix in zip(chosen.identifiers["datasets"], settings.prefixes, strict=True):
        matching = [d for d in descriptions if d.identifiers == part]
        if not matching:
            raise InputError(
                cache_dir, f"holds the blend but not the GPTDataset of {prefix} it was built from"
            )
        datasets.append(_gpt(matching[0], prefix, settings))
    dataset_index = chosen.array("dataset_index")
    dataset_sample_index = chosen.array("dataset_sample_index")
    if len(dataset_index) != len(dataset_sample_index) or (
        len(dataset_index) and int(dataset_index.max()) >= len(datasets)
    ):
        raise InputError(str(chosen.path), "its dataset index and dataset sample index disagree")
    for k, dataset in enumerate(datasets):
        served = dataset_sample_index[dataset_index == k]
        if len(served) and int(served.max()) >= dataset.samples:
            raise InputError(str(chosen.path), f"asks {prefix} for samples its GPTDataset does not hold")
    return Cache(datasets, dataset_index, dataset_sample_index, chosen)


def _same_weights(recorded: Any, given: list[float]) -> bool:
    if not isinstance(recorded, list) or len(recorded) != len(given):
        return False
    total = sum(given)
    return all(abs(float(r) - g / total) < 1e-9 for r, g in zip(recorded, given, strict=True))


def _gpt(description: Description, prefix: str, settings: Settings) -> GPTIndices:
    """A GPTDataset's indices, checked against the prefix's sequence lengths."""
    index = read_index(prefix)
    document_index = description.array("document_index")
    sample_index = description.array("sample_index")
    shuffle_index = description.array("shuffle_index")
    where = str(description.path.parent)
    if len(document_index) and int(document_index.max()) >= index.sequences:
        raise InputError(where, f"its GPTDataset {description.hash} indexes sequences {prefix} does not have")
    lengths = index.sequence_lengths[np.asarray(document_index)].astype(np.int64)
    stream = np.r_[0, np.cumsum(lengths)]
    starts = stream[np.asarray(sample_index[:-1, 0], np.int64)] + np.asarray(sample_index[:-1, 1], np.int64)
    expected = np.arange(len(starts), dtype=np.int64) * settings.seq_length
    if not np.array_equal(starts, expected) or len(shuffle_index) != len(starts):
        raise InputError(
            where,
            f"its GPTDataset {description.hash} does not match {prefix}: its samples do not start every "
            f"{settings.seq_length} tokens of these documents (the prefix was rewritten after Megatron "
            "built the cache, or the run used another --seq-length)",
        )
    return GPTIndices(prefix, description, index, document_index, sample_index, shuffle_index)
