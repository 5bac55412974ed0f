"""Hugging Face `datasets` inputs: Dataset/DatasetDict objects, `save_to_disk` folders, `hf:` paths.

They are exported once to Parquet under the run's work folder (one file per split, named after
the split), then read like any other shard: ids derive from the split name and row number.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from dataclean.errors import InputError
from dataclean.io.files import atomic_output, exists, make_dirs

HF_PREFIX = "hf:"


def is_saved_dataset(path: str) -> bool:
    """A folder written by `Dataset.save_to_disk` / `DatasetDict.save_to_disk`."""
    return os.path.isdir(path) and (
        os.path.exists(os.path.join(path, "dataset_dict.json"))
        or os.path.exists(os.path.join(path, "dataset_info.json"))
    )


def load(spec: str) -> Any:
    """Load a `hf:PATH` (datasets.load_dataset, offline) or a save_to_disk folder."""
    import datasets

    try:
        if spec.startswith(HF_PREFIX):
            return datasets.load_dataset(spec[len(HF_PREFIX) :])
        return datasets.load_from_disk(spec)
    except Exception as error:  # datasets raises many types; name the input either way
        raise InputError(spec, f"cannot load as a Hugging Face dataset: {error}") from None


def export(value: Any, folder: str, name: str) -> list[str]:
    """Write a Dataset (one file) or DatasetDict (one file per split) to Parquet in `folder`.

    `folder` may be on any filesystem (it is under the run's output folder).
    """
    splits = value.items() if hasattr(value, "keys") else [(name, value)]
    paths = []
    for split, dataset in splits:
        path = posixpath.join(folder, name if split == name else posixpath.join(name, split))
        path += ".parquet"
        if not exists(path):
            make_dirs(posixpath.dirname(path))
            with atomic_output(path) as sink:
                dataset.to_parquet(sink)
        paths.append(path)
    return paths
