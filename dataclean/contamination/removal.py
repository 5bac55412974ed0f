"""Cut the contaminated spans out of a text, GPT-3's way (Brown et al. 2020, appendix C).

Each matched n-gram is removed with `margin` characters on both sides (200 in GPT-3); the text
falls apart into the pieces between the cuts. Pieces shorter than `min_piece_chars` (200) are
discarded, and a text cut into more than `max_pieces` (10) pieces is contaminated as a whole and
dropped. The pieces that stay are joined by a line break.

The cut needs the matched n-grams' places in the original text, not in its normalized form:
`token_spans` normalizes each character alone with dedup's normalization (between two letters, so
that a separator shows as a space and a dropped character as nothing) and tokenizes as the n-gram
kernel does, giving each token with its span of characters. Only contaminated rows come here.
"""

from __future__ import annotations

from collections.abc import Sequence

from dataclean.dedup.shingles import DEFAULT_FOLD, Normalized, unsegmented_code_points


def token_spans(text: str, fold: Sequence[str] = DEFAULT_FOLD) -> tuple[list[str], list[tuple[int, int]]]:
    """The tokens of `text` as the n-gram kernel sees them, and each one's [start, end) in `text`."""
    if not text:
        return [], []
    probe = Normalized([f"a{char}a" for char in text], fold)
    table = unsegmented_code_points(fold)
    tokens: list[str] = []
    spans: list[tuple[int, int]] = []
    word, start = "", 0
    for position in range(len(text)):
        piece = probe.text(position)[1:-1]
        if not piece:
            continue  # dropped (a format character): the word goes on
        cp = ord(piece[0])
        unsegmented = bool(table[cp]) if cp < 0x10000 else 0x20000 <= cp < 0x40000
        if piece.isspace() or unsegmented:
            if word:
                tokens.append(word)
                spans.append((start, position))
                word = ""
            if unsegmented:
                tokens.append(piece)
                spans.append((position, position + 1))
            continue
        if not word:
            start = position
        word += piece
    if word:
        tokens.append(word)
        spans.append((start, len(text)))
    return tokens, spans


def cut_spans(
    text: str, spans: Sequence[tuple[int, int]], margin: int, min_piece_chars: int, max_pieces: int
) -> str | None:
    """`text` without `spans` and `margin` characters around each; None when nothing is left or
    the text fell into more than `max_pieces` pieces (module docstring)."""
    cuts = sorted((max(0, start - margin), min(len(text), end + margin)) for start, end in spans)
    merged: list[list[int]] = []
    for start, end in cuts:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, at = [], 0
    for start, end in merged:
        pieces.append(text[at:start])
        at = end
    pieces.append(text[at:])
    pieces = [piece for piece in pieces if piece.strip()]
    if len(pieces) > max_pieces:
        return None
    kept = [piece.strip() for piece in pieces if len(piece.strip()) >= min_piece_chars]
    return "\n".join(kept) if kept else None
