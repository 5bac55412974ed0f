"""Reference language models for perplexity scoring: load, score, train (CCNet recipe).

`load_model("en")` / `load_model("zh")` load the bundled models; `load_model(path)` a folder written
by `dataclean lm train` (`train_model`). `LanguageModel.perplexity(text)` scores one text,
`LanguageModel.perplexities(texts)` a batch.
"""

from __future__ import annotations

from dataclean.lm.model import DEFAULT_MIN_TOKENS, LanguageModel, load_model
from dataclean.lm.normalize import normalize_lines, normalize_text
from dataclean.lm.train import train_model

__all__ = [
    "DEFAULT_MIN_TOKENS",
    "LanguageModel",
    "load_model",
    "normalize_lines",
    "normalize_text",
    "train_model",
]
