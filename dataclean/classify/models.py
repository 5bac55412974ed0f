"""fastText quality classifiers: which model scores which rows, and the probability it gives.

A model is named on the command line as `NAME:PATH` (every language) or `NAME@LANG:PATH` (rows
whose `lang` is LANG; several languages may share one NAME, and so one column): PATH is a local
`.bin`/`.ftz` file or a URI any pyarrow filesystem reads (`s3://`, `gs://`, `hdfs://`, `file://`),
fetched once per machine (`dataclean.lm.fetch`). A row's score under NAME is the probability the
model gives its label (`label`, default the model's first label, fastText's most frequent in
training) for the row's text as one line.

What the model sees: the text with newlines as spaces (fastText predicts one line; DCLM's,
FineWeb-Edu's and Ultra-FineWeb's classifiers are applied so in datatrove's
`FastTextClassifierFilter`) and nothing else changed, unless the model was trained on other
preprocessing: `normalize="lowercase"`, or `"ccnet"` (`dataclean.lm.normalize`: lowercase,
accents stripped, digits as 0, unicode punctuation as ASCII). `dataclean classify train` applies
the same function to its training lines.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dataclean.errors import ConfigError
from dataclean.lang.fasttext import FastTextModel, predict, read_model, utf8_buffers
from dataclean.lm.fetch import check_remote_model, fetch_file, is_uri
from dataclean.lm.normalize import normalize_text

NORMALIZATIONS = ("none", "lowercase", "ccnet")
# fastText reads a line to its end: the whole text, however long.
WHOLE_TEXT = 1 << 62
_NAME = re.compile(r"^[A-Za-z0-9_]+$")

_models: dict[str, FastTextModel] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class ModelSpec:
    """One model: its column's name, the language it scores (None: every language), its file."""

    name: str
    lang: str | None
    path: str


def parse_models(values: tuple[str, ...], where: str = "classify.models") -> list[ModelSpec]:
    """`("dclm:/m/dclm.bin", "edu@zh:s3://b/zh.bin")` -> specs; checks each file exists."""
    specs: list[ModelSpec] = []
    seen: set[tuple[str, str | None]] = set()
    for value in values:
        head, sep, path = value.partition(":")
        name, at, lang = head.partition("@")
        name, lang, path = name.strip(), lang.strip(), path.strip()
        if not sep or not path or not _NAME.match(name) or (at and not lang):
            raise ConfigError(f"{where}: {value!r} is not NAME:PATH or NAME@LANG:PATH")
        key = (name, lang or None)
        if key in seen:
            raise ConfigError(f"{where}: {name}{'@' + lang if lang else ''} is given twice")
        seen.add(key)
        if is_uri(path):
            check_remote_model(path, single_file=True)
        elif not Path(path).is_file():
            raise ConfigError(f"{where}: {value!r}: no such model file")
        specs.append(ModelSpec(name, lang or None, path))
    return specs


def parse_named(values: tuple[str, ...], names: list[str], where: str) -> dict[str | None, str]:
    """`("X",)` or `("dclm=X", "edu=Y")` -> {model name, or None for every model: X}."""
    found: dict[str | None, str] = {}
    for value in values:
        name, sep, item = value.rpartition("=")
        key = name.strip() if sep else None
        if key is not None and key not in names:
            raise ConfigError(f"{where}: {value!r} names no model (models: {', '.join(names) or 'none'})")
        if not item.strip():
            raise ConfigError(f"{where}: {value!r} is not VALUE or NAME=VALUE")
        found[key] = item.strip()
    return found


def load_classifier(path: str) -> FastTextModel:
    """The fastText model at a local path or URI, read once per process."""
    with _lock:
        if path not in _models:
            local = fetch_file(path) if is_uri(path) else Path(path)
            _models[path] = read_model(local)
        return _models[path]


def prepare_texts(texts: pa.Array | pa.ChunkedArray, normalize: str) -> pa.Array | pa.ChunkedArray:
    """The texts as the model was trained on them (see the module docstring); newlines are
    spaces for the kernel in every case."""
    if normalize == "none":
        return texts
    if normalize == "lowercase":
        import pyarrow.compute as pc

        return pc.utf8_lower(texts)
    if normalize == "ccnet":
        values = [normalize_text(text) if text is not None else None for text in texts.to_pylist()]
        return pa.array(values, pa.string())
    raise ConfigError(f"classify.normalize: {normalize!r} is not one of {', '.join(NORMALIZATIONS)}")


def label_probability(
    model: FastTextModel,
    texts: pa.Array | pa.ChunkedArray,
    label: str | None,
    normalize: str = "none",
    exact: bool = True,
) -> np.ndarray:
    """float64 per text: the probability fastText's `predict` gives `label` (None: the model's
    first label) for the text as one line, as it reports it (float32); `exact=False`: to
    fastText's float32 rounding, faster (`dataclean.lang.fasttext_projected`)."""
    wanted = label if label is not None else model.labels[0]
    if wanted not in model.labels:
        known = ", ".join(model.labels)
        raise ConfigError(f"classify.label: {wanted!r} is not a label of the model ({known})")
    data, offsets = utf8_buffers(prepare_texts(texts, normalize))
    prediction = predict(model, data, offsets, WHOLE_TEXT, (wanted,), exact)
    return prediction.wanted_prob[:, 0].astype(np.float64)
