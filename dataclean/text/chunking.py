"""Cut a long text into balanced chunks under a budget of characters and/or tokens.

A chunk is a span `text[start:end]`. Without overlap the spans tile the text: every cut is at a
boundary from `dataclean.text.sentences`, the whitespace after a boundary stays at the end of the
chunk before it, so `"".join(chunks) == text`. With an overlap of N sentences, chunk k starts up to
N sentences before chunk k-1 ends; the spans then tell how to rebuild the text (each chunk from
where the previous one ended), see `chunk_spans`.

How cuts are chosen (balancing rule):
1. Sentences, lines and paragraphs are the units; a unit over the budget alone is cut at weak
   punctuation, then whitespace, then (last resort) at a character boundary that is not inside a
   surrogate pair or a grapheme cluster, into pieces that fit (a cluster longer than the budget,
   as in Zalgo text, is cut: the budget wins; a surrogate pair never is).
2. The text becomes the fewest chunks that fit (n, found by greedy packing, which is optimal for
   this), so no chunk is created that the budget does not require.
3. Each cut goes to the strongest boundary (paragraph > sentence > line > clause > space > char)
   within +-`balance` x (total/n) of an even share of the text not yet chunked
   (remaining / chunks left), the one nearest the even share among equals; when that window has no
   boundary that keeps the rest packable into the chunks left, the nearest one that does.
   So chunks come out near total/n each: no tiny tail chunk unless the text's boundaries force one.

Token budgets: a unit's tokens are counted alone (minus the special tokens `encode("")` adds) and
summed, then every chunk is encoded whole and re-cut with a tighter budget if the sum was short.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any, Protocol

from dataclean.text.sentences import (
    CHAR,
    CLAUSE,
    char_boundary,
    sentence_boundaries,
    weak_boundaries,
)

DEFAULT_BALANCE = 0.25
_TOKEN_RETRIES = 4


class Tokenizer(Protocol):
    """Anything with `encode(text) -> token ids`: Hugging Face, SentencePiece, tiktoken."""

    def encode(self, text: str) -> Sequence[Any]: ...


class _Budget:
    """Size of a span in characters and/or tokens, and whether it fits."""

    def __init__(
        self, text: str, max_chars: int | None, max_tokens: int | None, tokenizer: Tokenizer | None
    ) -> None:
        self.text = text
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        self.encode = tokenizer.encode if tokenizer is not None and max_tokens else None
        # Special tokens (BOS/EOS) that encode adds once per call, not once per unit.
        self.overhead = len(self.encode("")) if self.encode else 0
        self._counts: dict[tuple[int, int], int] = {}

    def tokens(self, start: int, end: int) -> int:
        """Tokens of text[start:end] without the special tokens (each span encoded once)."""
        assert self.encode is not None
        key = (start, end)
        count = self._counts.get(key)
        if count is None:
            count = self._counts[key] = len(self.encode(self.text[start:end])) - self.overhead
        return count

    def too_big(self, start: int, end: int) -> bool:
        if self.max_chars is not None and end - start > self.max_chars:
            return True
        if self.encode is not None and self.max_tokens is not None:
            return self.tokens(start, end) > self.max_tokens - self.overhead
        return False

    def ratio(self, start: int, end: int) -> float:
        """How many budgets the span takes (the larger of chars and tokens)."""
        ratios = [0.0]
        if self.max_chars:
            ratios.append((end - start) / self.max_chars)
        if self.encode is not None and self.max_tokens:
            ratios.append(self.tokens(start, end) / max(1, self.max_tokens - self.overhead))
        return max(ratios)

    def copy(self, text: str | None = None) -> _Budget:
        other = _Budget.__new__(_Budget)
        other.__dict__.update(self.__dict__)
        if text is not None:
            other.text = text
            other._counts = {}
        return other

    def tightened(self, factor: float) -> _Budget:
        tighter = self.copy()
        if self.max_chars is not None:
            tighter.max_chars = max(1, int(self.max_chars * factor))
        if self.max_tokens is not None:
            spare = self.max_tokens - self.overhead
            tighter.max_tokens = self.overhead + max(1, int(spare * factor))
        return tighter


def _hard_cuts(budget: _Budget, start: int, end: int) -> list[tuple[int, int]]:
    """Character-level cuts that split text[start:end] into pieces that fit."""
    text = budget.text
    pieces = max(2, math.ceil(budget.ratio(start, end)))
    cuts: list[tuple[int, int]] = []
    previous = start
    for index in range(1, pieces):
        position = char_boundary(text, start + round(index * (end - start) / pieces), previous, end)
        if previous < position < end:
            cuts.append((position, CHAR))
            previous = position
    if not cuts:
        return []
    result: list[tuple[int, int]] = []
    edges = [start, *(position for position, _ in cuts), end]
    for left, right in itertools.pairwise(edges):
        if budget.too_big(left, right) and right - left > 1:
            result.extend(_hard_cuts(budget, left, right))
        if right != end:
            result.append((right, CHAR))
    return result


def _inner_cuts(budget: _Budget, start: int, end: int, level: int) -> list[tuple[int, int]]:
    """Cuts inside text[start:end] at `level` or weaker so that every piece fits."""
    if level >= CHAR:
        return _hard_cuts(budget, start, end)
    result: list[tuple[int, int]] = []
    previous = start
    for position in [*weak_boundaries(budget.text, start, end, level), end]:
        if budget.too_big(previous, position):
            result.extend(_inner_cuts(budget, previous, position, level + 1))
        if position != end:
            result.append((position, level))
        previous = position
    return result


def _units(budget: _Budget, ends: list[int], levels: list[int]) -> tuple[list[int], list[int]]:
    """Unit edges [0, ..., len(text)] and the level of each edge (the first and last unused)."""
    if budget.encode is None and budget.max_chars is not None:
        positions = [*ends, len(budget.text)]
        if max(map(operator.sub, positions, [0, *ends])) <= budget.max_chars:
            return [0, *positions], [0, *levels, 0]  # no sentence over the budget: the fast path
    edges = [0]
    edge_levels = [0]
    for position, level in zip([*ends, len(budget.text)], [*levels, 0], strict=True):
        if budget.too_big(edges[-1], position):
            for inner, inner_level in _inner_cuts(budget, edges[-1], position, CLAUSE):
                edges.append(inner)
                edge_levels.append(inner_level)
        edges.append(position)
        edge_levels.append(level)
    edge_levels[-1] = 0
    return edges, edge_levels


def _pack(sizes: list[list[int]], limits: list[int], levels: list[int], balance: float) -> list[int]:
    """Unit indices where chunks start and end: [0, c1, ..., m]. See the module docstring.

    `sizes[i]` is the cumulative size in measure i (chars, tokens) at each unit edge, `limits[i]`
    its budget; the last measure is the one chunks are balanced on.
    """
    m = len(levels) - 1

    def reach(j: int) -> int:
        return min(bisect_right(cum, cum[j] + limit) - 1 for cum, limit in zip(sizes, limits, strict=True))

    def back(j: int) -> int:
        return max(bisect_left(cum, cum[j] - limit) for cum, limit in zip(sizes, limits, strict=True))

    count = 0
    position = 0
    while position < m:
        position = max(position + 1, reach(position))
        count += 1
    earliest = [0] * (count + 1)
    earliest[count] = m
    for k in range(count - 1, 0, -1):
        earliest[k] = back(earliest[k + 1])

    primary = sizes[-1]
    total = primary[m]
    slack = balance * total / count
    cuts = [0]
    for k in range(1, count):
        previous = cuts[-1]
        if previous >= m - 1:
            break
        high = min(max(previous + 1, reach(previous)), m - 1)
        low = min(max(earliest[k], previous + 1), high)
        target = primary[previous] + (total - primary[previous]) / (count - k + 1)
        window_low = max(low, bisect_left(primary, target - slack))
        window_high = min(high, bisect_right(primary, target + slack) - 1)
        if window_low > window_high:
            nearest = min(max(bisect_left(primary, target), low), high)
            window_low, window_high = max(low, nearest - 1), nearest
        best = min(
            range(window_low, window_high + 1),
            key=lambda j: (levels[j], abs(primary[j] - target)),
        )
        cuts.append(best)
    # Only a unit alone over the budget (a surrogate pair over max_chars=1, a character over a
    # tiny token budget) can leave the rest too big: finish greedily, one unit at least per chunk.
    while cuts[-1] < m and reach(cuts[-1]) < m:
        cuts.append(max(cuts[-1] + 1, reach(cuts[-1])))
    if cuts[-1] < m:
        cuts.append(m)
    return cuts


def chunk_spans(
    text: str,
    max_chars: int | None = None,
    max_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
    overlap_sentences: int = 0,
    balance: float = DEFAULT_BALANCE,
) -> list[tuple[int, int]]:
    """(start, end) of each chunk of `text`; one span (0, len) when it fits the budget.

    Without overlap, spans tile the text. With overlap, chunk k starts up to `overlap_sentences`
    sentences before chunk k-1's end (fewer when they would not fit), so the text is
    `text[s0:e0] + text[e0:e1] + text[e1:e2] + ...`: each chunk from where the previous one ended.
    To leave room for the overlap, chunks are packed to a budget reduced by about the size of
    `overlap_sentences` average sentences (at most half the budget).
    """
    if max_chars is None and max_tokens is None:
        raise ValueError("give max_chars, max_tokens or both")
    if max_tokens is not None and tokenizer is None:
        raise ValueError("max_tokens needs a tokenizer")
    budget = _Budget(text, max_chars, max_tokens, tokenizer)
    if not text or not budget.too_big(0, len(text)):
        return [(0, len(text))]
    ends, levels = sentence_boundaries(text)
    core = budget
    if overlap_sentences > 0:
        reserve = overlap_sentences * budget.ratio(0, len(text)) / (len(ends) + 1)
        core = budget.tightened(1 - min(0.5, reserve))
    spans = _spans(core, balance, ends, levels)
    if budget.encode is not None:
        spans = _verified(core, spans, balance)
    if overlap_sentences > 0:
        spans = _with_overlap(budget, spans, ends, overlap_sentences)
    return spans


def _spans(budget: _Budget, balance: float, ends: list[int], levels: list[int]) -> list[tuple[int, int]]:
    """Packed spans of budget.text, given its sentence boundaries."""
    edges, edge_levels = _units(budget, ends, levels)
    sizes: list[list[int]] = []
    limits: list[int] = []
    if budget.max_chars is not None:
        sizes.append(edges)
        limits.append(budget.max_chars)
    if budget.encode is not None and budget.max_tokens is not None:
        cumulative = [0]
        for left, right in itertools.pairwise(edges):
            cumulative.append(cumulative[-1] + budget.tokens(left, right))
        sizes.append(cumulative)
        limits.append(budget.max_tokens - budget.overhead)
    cuts = _pack(sizes, limits, edge_levels, balance)
    return [(edges[a], edges[b]) for a, b in itertools.pairwise(cuts)]


def _recut(budget: _Budget, balance: float, start: int, end: int) -> list[tuple[int, int]]:
    """Packed spans of budget.text[start:end], as offsets into budget.text."""
    piece = budget.copy(budget.text[start:end])
    ends, levels = sentence_boundaries(piece.text)
    return [(start + a, start + b) for a, b in _spans(piece, balance, ends, levels)]


def _verified(budget: _Budget, spans: list[tuple[int, int]], balance: float) -> list[tuple[int, int]]:
    """Re-cut chunks whose own token count is over budget (summed unit counts can be short)."""
    result: list[tuple[int, int]] = []
    for start, end in spans:
        pending = [(start, end)]
        factor = 1.0
        for _ in range(_TOKEN_RETRIES):
            if not any(budget.too_big(a, b) for a, b in pending):
                break
            factor *= 0.85
            tighter = budget.tightened(factor)
            pending = [
                piece
                for a, b in pending
                for piece in (_recut(tighter, balance, a, b) if budget.too_big(a, b) else [(a, b)])
            ]
        result.extend(pending)
    return result


def _with_overlap(
    budget: _Budget, spans: list[tuple[int, int]], ends: list[int], overlap: int
) -> list[tuple[int, int]]:
    """Start each chunk up to `overlap` sentences before its predecessor's end, within budget."""
    result = [spans[0]]
    for (previous_start, _), (start, end) in itertools.pairwise(spans):
        index = bisect_left(ends, start)  # ends[:index] are the sentence ends before `start`
        chosen = start
        for candidate in ends[max(0, index - overlap) : index]:  # earliest first: most overlap
            if candidate > previous_start and not budget.too_big(candidate, end):
                chosen = candidate
                break
        result.append((chosen, end))
    return result


def chunk_text(
    text: str,
    max_chars: int | None = None,
    max_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
    overlap_sentences: int = 0,
    balance: float = DEFAULT_BALANCE,
) -> list[str]:
    """The chunks of `text` (see `chunk_spans`); `"".join(...) == text` without overlap."""
    spans = chunk_spans(text, max_chars, max_tokens, tokenizer, overlap_sentences, balance)
    return [text[start:end] for start, end in spans]


class _EncodingIds:
    """Adapts a `tokenizers.Tokenizer` (whose encode returns an Encoding) to `encode -> ids`."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> Sequence[int]:
        ids: Sequence[int] = self.tokenizer.encode(text).ids
        return ids


def load_tokenizer(spec: str) -> Tokenizer:
    """A tokenizer from a spec string, for budgets given on the command line.

    `sentencepiece:PATH` (or a path ending in .model): a SentencePiece model file;
    `tokenizers:PATH` (or a path ending in .json): a Hugging Face tokenizer.json;
    `hf:DIR`: a saved Hugging Face tokenizer folder (`save_pretrained`), read from its
    tokenizer.json. Every spec names local files: nothing is downloaded at run time. The
    libraries are imported only when asked for.
    """
    kind, sep, target = spec.partition(":")
    if not sep or kind not in ("sentencepiece", "tokenizers", "hf"):
        target = spec
        kind = "sentencepiece" if spec.endswith(".model") else "tokenizers"
        if not spec.endswith((".model", ".json")):
            raise ValueError(f"tokenizer {spec!r}: use sentencepiece:PATH, tokenizers:PATH or hf:DIR")
    if kind == "sentencepiece":
        import sentencepiece

        processor: Tokenizer = sentencepiece.SentencePieceProcessor(model_file=target)
        return processor
    if kind == "hf":
        folder = target
        target = os.path.join(folder, "tokenizer.json")
        if not os.path.isfile(target):
            raise ValueError(
                f"tokenizer {spec!r}: hf:DIR takes a local folder holding a tokenizer.json "
                "(a Hugging Face tokenizer saved with save_pretrained); nothing is downloaded"
            )
    try:
        import tokenizers
    except ImportError:
        raise ImportError(
            f"tokenizer {spec!r} needs the Hugging Face `tokenizers` package, an optional "
            'dependency: pip install "dataclean[tokenizers]"'
        ) from None
    return _EncodingIds(tokenizers.Tokenizer.from_file(target))
