"""Interpolated modified Kneser-Ney n-gram estimation in numpy, written as ARPA: lmplz's estimate.

KenLM's Python module can only query models; its trainer `lmplz` is C++. This module estimates the
same model (Heafield et al. 2013, "Scalable Modified Kneser-Ney Language Model Estimation"; Chen &
Goodman 1998) so that `dataclean lm train` works where `lmplz` is not installed:

- each sentence is `<s> w1 ... wk </s>`; n-grams never cross sentences;
- adjusted counts: raw counts for the highest order and for n-grams starting with `<s>`; for other
  lower-order n-grams, the number of distinct words seen to their left (continuation counts);
- discounts D1, D2, D3+ per order from the counts of adjusted counts 1..4 (Chen & Goodman eq. 26),
  or fallback discounts when those are undefined or out of range (lmplz `--discount_fallback`);
- p(w | h) = (a(hw) - D(a(hw))) / sum_x a(hx) + gamma(h) p(w | h'), where gamma(h) takes the
  discounted mass plus the whole mass of pruned n-grams, so every context sums to one; unigrams
  interpolate with the uniform distribution over the vocabulary (`<unk>` included, `<s>` not);
- pruning (lmplz `--prune`): an n-gram of order n >= 2 whose raw count is at most the threshold of
  its order is left out; thresholds must not decrease with the order, so every kept n-gram's prefix
  and suffix are kept too. Discounts are computed before pruning, as lmplz does.

The ARPA backoff weight of a context is its gamma, so ARPA backoff scoring reproduces the
interpolated probabilities exactly. Vocabulary ids: 0 `<unk>`, 1 `<s>`, 2 `</s>`, then words in
order of first appearance.
"""

from __future__ import annotations

import gzip
import io
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

UNK, BOS, EOS = 0, 1, 2
SPECIALS = ("<unk>", "<s>", "</s>")
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


@dataclass
class OrderTable:
    """The n-gram types of one order n, as arrays indexed by type id.

    `prefix` and `suffix` are the type ids (in the order n-1 table) of words 1..n-1 and 2..n;
    for unigrams they are unused (-1). `first` and `last` are word ids.
    """

    prefix: np.ndarray
    suffix: np.ndarray
    first: np.ndarray
    last: np.ndarray
    raw: np.ndarray
    adjusted: np.ndarray | None = None
    discounts: tuple[float, float, float] = FALLBACK_DISCOUNTS
    kept: np.ndarray | None = None
    log_prob: np.ndarray | None = None
    log_backoff: np.ndarray | None = None


def encode_corpus(
    sentences: Iterable[str | Sequence[str]],
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Map tokenized sentences to ids: (vocabulary, ids with <s> and </s>, sentence starts)."""
    vocab = {name: index for index, name in enumerate(SPECIALS)}
    ids: list[int] = []
    starts: list[int] = []
    for sentence in sentences:
        tokens = sentence.split() if isinstance(sentence, str) else sentence
        starts.append(len(ids))
        ids.append(BOS)
        # Special symbols inside the text are treated as unknown words.
        ids.extend(vocab.setdefault(token, len(vocab)) if token not in SPECIALS else UNK for token in tokens)
        ids.append(EOS)
    words = list(vocab)
    return words, np.asarray(ids, dtype=np.int64), np.asarray(starts, dtype=np.int64)


def count_ngrams(ids: np.ndarray, starts: np.ndarray, vocab_size: int, order: int) -> list[OrderTable]:
    """Count n-gram types of orders 1..order; tables[n-1] holds order n."""
    lengths = np.diff(np.append(starts, len(ids)))
    sentence_end = np.repeat(starts + lengths, lengths)
    positions = np.arange(len(ids))
    tables = [
        OrderTable(
            prefix=np.full(vocab_size, -1),
            suffix=np.full(vocab_size, -1),
            first=np.arange(vocab_size),
            last=np.arange(vocab_size),
            raw=np.bincount(ids, minlength=vocab_size),
        )
    ]
    type_at = ids  # type id of the (n-1)-gram starting at each position
    for n in range(2, order + 1):
        previous = tables[-1]
        if len(previous.raw) * vocab_size >= 2**63:
            raise ValueError(f"too many {n - 1}-grams for a vocabulary of {vocab_size}")
        starts_n = positions[positions + n <= sentence_end]
        keys = type_at[starts_n] * vocab_size + ids[starts_n + n - 1]
        unique, first_seen, inverse, counts = np.unique(
            keys, return_index=True, return_inverse=True, return_counts=True
        )
        prefix = unique // vocab_size
        tables.append(
            OrderTable(
                prefix=prefix,
                suffix=type_at[starts_n[first_seen] + 1],
                first=previous.first[prefix],
                last=unique % vocab_size,
                raw=counts,
            )
        )
        next_type_at = np.full(len(ids), -1, dtype=np.int64)
        next_type_at[starts_n] = inverse.reshape(-1)
        type_at = next_type_at
    return tables


def _discounts(adjusted: np.ndarray, fallback: tuple[float, float, float]) -> tuple[float, float, float]:
    """D1, D2, D3+ from counts of adjusted counts (Chen & Goodman eq. 26), in float32 like lmplz."""
    n = [np.float32(np.count_nonzero(adjusted == k)) for k in range(5)]
    if min(n[1], n[2], n[3]) == 0:
        return fallback
    y = np.float32(n[1] / np.float32(n[1] + 2.0 * n[2]))
    result = []
    for k in (1, 2, 3):
        discount = np.float32(k) - np.float32(k + 1) * y * n[k + 1] / n[k]
        if not 0.0 <= discount <= k:
            return fallback
        result.append(float(discount))
    return (result[0], result[1], result[2])


def _discount_of(adjusted: np.ndarray, discounts: tuple[float, float, float]) -> np.ndarray:
    table = np.array((0.0, *discounts))
    result: np.ndarray = table[np.minimum(adjusted, 3)]
    return result


def estimate(
    tables: list[OrderTable],
    prune: Sequence[int] = (0,),
    discount_fallback: tuple[float, float, float] = FALLBACK_DISCOUNTS,
) -> None:
    """Fill adjusted counts, discounts, kept flags, log10 probabilities and backoffs in place."""
    order = len(tables)
    thresholds = [*prune, *[prune[-1]] * order][:order] if prune else [0] * order
    if thresholds[0] != 0:
        raise ValueError("prune: unigrams cannot be pruned (the first threshold must be 0)")
    if any(b < a for a, b in itertools.pairwise(thresholds)):
        raise ValueError(f"prune: thresholds must not decrease with the order, got {thresholds}")

    for n, table in enumerate(tables, start=1):
        if n == order:
            adjusted = table.raw.copy()
        else:
            continuation = np.bincount(tables[n].suffix, minlength=len(table.raw))
            adjusted = np.where(table.first == BOS, table.raw, continuation)
        if n == 1:
            adjusted[BOS] = 0  # <s> is never predicted
        table.adjusted = adjusted
        table.discounts = _discounts(adjusted, discount_fallback)
        table.kept = table.raw > thresholds[n - 1] if n > 1 else np.ones(len(adjusted), dtype=bool)

    # Unigrams: interpolate with the uniform distribution over the vocabulary without <s>.
    unigrams = tables[0]
    assert unigrams.adjusted is not None
    discount = _discount_of(unigrams.adjusted, unigrams.discounts)
    total = unigrams.adjusted.sum()
    gamma = discount.sum() / total
    probs = (unigrams.adjusted - discount) / total + gamma / (len(unigrams.adjusted) - 1)
    probs[BOS] = 1.0
    unigrams.log_prob = np.minimum(0.0, np.log10(probs))

    for n in range(2, order + 1):
        table, lower = tables[n - 1], tables[n - 2]
        assert table.adjusted is not None and table.kept is not None
        discount = _discount_of(table.adjusted, table.discounts)
        contexts = len(lower.raw)
        denominator = np.bincount(table.prefix, weights=table.adjusted, minlength=contexts)
        # A pruned n-gram's whole adjusted count goes to its context's backoff mass.
        mass = np.where(table.kept, discount, table.adjusted)
        with np.errstate(invalid="ignore", divide="ignore"):
            gamma_of_context = np.bincount(table.prefix, weights=mass, minlength=contexts) / denominator
        context_gamma = gamma_of_context[table.prefix]
        interpolated = (table.adjusted - discount) / denominator[table.prefix] + context_gamma * probs[
            table.suffix
        ]
        # Contexts never extended (or ending in </s> or <unk>) back off with weight 1.
        backoff = np.where(np.isnan(gamma_of_context), 1.0, gamma_of_context)
        backoff[np.isin(lower.last, (EOS, UNK))] = 1.0
        lower.log_backoff = np.log10(backoff)
        probs = interpolated
        table.log_prob = np.minimum(0.0, np.log10(np.maximum(probs, 1e-300)))


def _open_text(path: Path) -> TextIO:
    """A text file for writing; gzip (with a fixed timestamp: reproducible bytes) for .gz."""
    if path.suffix != ".gz":
        return path.open("w", encoding="utf-8")
    raw = gzip.GzipFile(path, "wb", mtime=0)
    return io.TextIOWrapper(raw, encoding="utf-8")  # closing it closes the gzip stream


def write_arpa(tables: list[OrderTable], words: list[str], path: str | Path, digits: int = 6) -> None:
    """Write the kept n-grams as ARPA text (gzip-compressed when `path` ends in .gz)."""
    path = Path(path)
    names = np.asarray(words, dtype=object)
    order = len(tables)
    fmt = f"%.{digits}g"
    with _open_text(path) as out:
        out.write("\\data\\\n")
        for n, table in enumerate(tables, start=1):
            assert table.kept is not None
            out.write(f"ngram {n}={int(table.kept.sum())}\n")
        text_of: np.ndarray = names
        for n, table in enumerate(tables, start=1):
            assert table.kept is not None and table.log_prob is not None
            kept = np.flatnonzero(table.kept)
            last = names[table.last[kept]]
            texts = last if n == 1 else text_of[table.prefix[kept]] + " " + last
            out.write(f"\n\\{n}-grams:\n")
            probs = [fmt % value for value in table.log_prob[kept].tolist()]
            if n < order:
                assert table.log_backoff is not None
                backoffs = [fmt % value for value in table.log_backoff[kept].tolist()]
                out.writelines(
                    f"{p}\t{t}\t{b}\n" for p, t, b in zip(probs, texts.tolist(), backoffs, strict=True)
                )
            else:
                out.writelines(f"{p}\t{t}\n" for p, t in zip(probs, texts.tolist(), strict=True))
            full = np.empty(len(table.raw), dtype=object)
            full[kept] = texts
            text_of = full
        out.write("\n\\end\\\n")


def train_arpa(
    sentences: Iterable[str | Sequence[str]],
    path: str | Path,
    order: int = 4,
    prune: Sequence[int] = (0,),
    discount_fallback: tuple[float, float, float] = FALLBACK_DISCOUNTS,
    digits: int = 6,
) -> dict[str, object]:
    """Estimate a model from tokenized sentences and write it as ARPA; return a summary of it."""
    if order < 1:
        raise ValueError(f"order must be at least 1, got {order}")
    words, ids, starts = encode_corpus(sentences)
    tables = count_ngrams(ids, starts, len(words), order)
    estimate(tables, prune, discount_fallback)
    write_arpa(tables, words, path, digits)
    return {
        "order": order,
        "tokens": int(len(ids) - 2 * len(starts)),
        "sentences": len(starts),
        "ngrams": [int(t.kept.sum()) for t in tables if t.kept is not None],
        "discounts": [list(t.discounts) for t in tables],
    }
