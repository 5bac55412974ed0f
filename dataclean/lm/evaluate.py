"""How well a reference model separates clean text from damaged text: damage functions and AUC.

The damage kinds are the failures perplexity filtering is meant to catch (CCNet, Wenzek et al.
2020): word salad (`shuffle_words`), characters in the wrong order (`shuffle_chars`, for scripts
without spaces), garbled characters (`garble_chars`: a fraction of the characters replaced by random
ones of the same script, as broken encodings and OCR produce), and boilerplate in place of prose
(`replace_with_boilerplate`). The AUC is the probability that a damaged text gets a higher
perplexity than a clean one (Mann-Whitney U / (n_clean * n_damaged)); 0.5 is chance, 1.0 perfect.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

Damage = Callable[[str, random.Random], str]

GARBLE_RATE = 0.3
_LATIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def shuffle_words(text: str, rng: random.Random) -> str:
    """The same words in a random order."""
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def shuffle_chars(text: str, rng: random.Random) -> str:
    """The same characters in a random order (word salad for Chinese)."""
    chars = list(text)
    rng.shuffle(chars)
    return "".join(chars)


def garble_chars(text: str, rng: random.Random, rate: float = GARBLE_RATE) -> str:
    """Replace a `rate` fraction of non-space characters by random letters of the same script.

    CJK ideographs become random ideographs of the CJK Unified block; anything else becomes a random
    Latin letter.
    """
    chars = list(text)
    for i, char in enumerate(chars):
        if char.isspace() or rng.random() >= rate:
            continue
        if "\u4e00" <= char <= "\u9fff":
            chars[i] = chr(rng.randint(0x4E00, 0x9FFF))
        else:
            chars[i] = rng.choice(_LATIN)
    return "".join(chars)


def boilerplate_replacer(boilerplate: Sequence[str]) -> Damage:
    """A damage that replaces a text by random boilerplate lines of about the same length."""

    def replace_with_boilerplate(text: str, rng: random.Random) -> str:
        lines: list[str] = []
        while sum(map(len, lines)) < len(text):
            lines.append(rng.choice(boilerplate))
        return "\n".join(lines)

    return replace_with_boilerplate


def auc(clean: np.ndarray, damaged: np.ndarray) -> float:
    """P(damaged score > clean score), ties counting one half; NaN scores are left out."""
    clean = np.asarray(clean, dtype=np.float64)
    damaged = np.asarray(damaged, dtype=np.float64)
    clean, damaged = clean[~np.isnan(clean)], damaged[~np.isnan(damaged)]
    both = np.concatenate([clean, damaged])
    order = both.argsort(kind="mergesort")
    ranks = np.empty(len(both))
    ranks[order] = np.arange(1, len(both) + 1)
    # Average ranks over ties.
    _, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    ranks = (sums / counts)[inverse]
    damaged_ranks = ranks[len(clean) :].sum()
    u = damaged_ranks - len(damaged) * (len(damaged) + 1) / 2
    return float(u / (len(clean) * len(damaged)))


def damage_all(texts: Sequence[str], damage: Damage, seed: int = 0) -> list[str]:
    """Apply `damage` to every text with one seeded random generator (reproducible)."""
    rng = random.Random(seed)
    return [damage(text, rng) for text in texts]
