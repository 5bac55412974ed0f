"""Train a reference model folder (see `dataclean.lm.model`) from trusted text.

The steps mirror scoring: normalize every line, train SentencePiece on the normalized lines,
tokenize them, and estimate a modified Kneser-Ney n-gram model on the pieces, with KenLM's `lmplz`
when it is on PATH and with `dataclean.lm.kneser_ney` (the same estimate, in numpy) otherwise.
The numpy trainer holds the corpus in memory (about 200 bytes per token at order 4); `lmplz`
streams to disk and suits corpora of more than some tens of millions of tokens.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from dataclean.errors import ConfigError
from dataclean.lm import kneser_ney
from dataclean.lm.model import METADATA_FILE, MODEL_FILES, TOKENIZER_FILE
from dataclean.lm.normalize import normalize_lines
from dataclean.lm.tokenizer import Tokenizer, train_sentencepiece

Trainer = Literal["auto", "lmplz", "python"]
ARPA_FILE = "model.arpa.gz"


def choose_trainer(trainer: Trainer) -> Literal["lmplz", "python"]:
    """`lmplz` if asked for or, with `auto`, if it is on PATH; else the numpy trainer."""
    if trainer == "lmplz" and shutil.which("lmplz") is None:
        raise ConfigError("--trainer lmplz: lmplz is not on PATH")
    if trainer == "auto":
        return "lmplz" if shutil.which("lmplz") else "python"
    return trainer


def _lmplz(tokenized: Sequence[str], arpa_gz: Path, order: int, prune: Sequence[int]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        text = Path(scratch) / "corpus.txt"
        text.write_text("".join(line + "\n" for line in tokenized), encoding="utf-8")
        arpa = Path(scratch) / "model.arpa"
        command = ["lmplz", "-o", str(order), "--text", str(text), "--arpa", str(arpa)]
        command += ["--discount_fallback", "-S", "20%", "-T", scratch]
        if any(prune):
            command += ["--prune", *map(str, prune)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"lmplz failed: {result.stderr[-2000:]}")
        with arpa.open("rb") as source, gzip.GzipFile(arpa_gz, "wb", mtime=0) as target:
            shutil.copyfileobj(source, target)


def train_model(
    texts: Iterable[str],
    output: str | Path,
    order: int = 4,
    vocab_size: int = 8000,
    prune: Sequence[int] = (0,),
    character_coverage: float = 0.9995,
    trainer: Trainer = "auto",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train SentencePiece + KenLM on `texts` (each may hold several lines); write `output`/.

    Returns the metadata written to model.json.
    """
    if order < 1:
        raise ConfigError(f"order: must be at least 1, got {order}")
    if vocab_size < 10:
        raise ConfigError(f"vocab_size: must be at least 10, got {vocab_size}")
    if any(value < 0 for value in prune):
        raise ConfigError(f"prune: thresholds must be >= 0, got {list(prune)}")
    lines = [line for text in texts for line in normalize_lines(text)]
    if not lines:
        raise ConfigError("no training text: every corpus line is empty after normalization")
    chosen = choose_trainer(trainer)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    for stale in MODEL_FILES:  # the loader would prefer an older model.bin over the new ARPA
        (output / stale).unlink(missing_ok=True)
    proto = train_sentencepiece(lines, vocab_size, character_coverage)
    (output / TOKENIZER_FILE).write_bytes(proto)
    tokenized = Tokenizer(proto).tokenize_lines(lines)
    if chosen == "lmplz":
        _lmplz(tokenized, output / ARPA_FILE, order, prune)
        summary: dict[str, Any] = {}
    else:
        summary = kneser_ney.train_arpa(tokenized, output / ARPA_FILE, order=order, prune=prune)
    info: dict[str, Any] = {
        **(metadata or {}),
        "order": order,
        "vocab_size": vocab_size,
        "prune": list(prune),
        "character_coverage": character_coverage,
        "trainer": chosen,
        "lines": len(lines),
        "characters": sum(map(len, lines)),
        "pieces": sum(line.count(" ") + 1 for line in tokenized),
        "normalization": "ccnet (dataclean.lm.normalize)",
        **{key: summary[key] for key in ("ngrams", "discounts") if key in summary},
    }
    (output / METADATA_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    return info
