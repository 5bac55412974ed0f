"""Normalize and tokenize a whole Arrow batch in one compiled pass: the input KenLM scores.

For every text of a string array, one numba loop reads the UTF-8 bytes, normalizes each character
through the table of `dataclean.lm.charmap`, splits lines and collapses whitespace (as
`normalize_lines`), segments each line with SentencePiece's unigram Viterbi search over the trie of
`dataclean.lm.unigram`, and writes the pieces, space-separated, one line per "\n", as UTF-8. The
search is SentencePiece's (`unigram::Model::EncodeOptimized`, sentencepiece 0.2): positions left to
right, pieces starting there shortest first, a candidate replacing the best path to its end only if
its float32 score is strictly higher; a character no single-character piece covers is an unknown,
and a run of unknowns is one piece, as SentencePiece merges them. So the pieces are SentencePiece's
own, which the tests check on real text.

Texts holding a character the table cannot normalize alone (`charmap.UNSAFE`) are flagged and left
out; the caller normalizes those with `normalize_text` and runs them again with `whitespace_table`.
"""

from __future__ import annotations

import functools
import sys

import numba
import numpy as np

from dataclean.lm.charmap import IDENTITY, NEWLINE, SPACE, UNSAFE

WORD_START = 0x2581  # "▁", SentencePiece's whitespace symbol, starts every word


@functools.cache
def whitespace_table() -> tuple[np.ndarray, np.ndarray]:
    """(index, pool) that only turns whitespace into spaces: for text normalized already."""
    index = np.full(sys.maxunicode + 1, IDENTITY, np.int32)
    spaces = [c for c in range(sys.maxunicode + 1) if chr(c).isspace() and c != NEWLINE]
    index[spaces] = 1
    index[0xD800:0xE000] = UNSAFE
    return index, np.array([0, 1, SPACE], np.int32)


@numba.njit(cache=True)
def _child(node, char_id, width, root_children, edge_keys, edge_nodes):  # type: ignore[no-untyped-def]
    if char_id == 0:
        return -1
    if node == 0:
        return root_children[char_id]
    key = node * width + char_id
    mask = len(edge_keys) - 1
    mixed = (key * 0x9E3779B1) & 0x7FFFFFFFFFFFFFFF
    position = (mixed ^ (mixed >> 29)) & mask
    while True:
        found = edge_keys[position]
        if found == key:
            return edge_nodes[position]
        if found == -1:
            return -1
        position = (position + 1) & mask


@numba.njit(cache=True)
def _grow(array, needed):  # type: ignore[no-untyped-def]
    if needed <= len(array):
        return array
    bigger = np.empty(max(needed, 2 * len(array)), array.dtype)
    bigger[: len(array)] = array
    return bigger


@numba.njit(cache=True)
def _utf8_length(code):  # type: ignore[no-untyped-def]
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


@numba.njit(cache=True)
def _write_utf8(out, position, code):  # type: ignore[no-untyped-def]
    if code < 0x80:
        out[position] = code
        return position + 1
    if code < 0x800:
        out[position] = 0xC0 | (code >> 6)
        out[position + 1] = 0x80 | (code & 0x3F)
        return position + 2
    if code < 0x10000:
        out[position] = 0xE0 | (code >> 12)
        out[position + 1] = 0x80 | ((code >> 6) & 0x3F)
        out[position + 2] = 0x80 | (code & 0x3F)
        return position + 3
    out[position] = 0xF0 | (code >> 18)
    out[position + 1] = 0x80 | ((code >> 12) & 0x3F)
    out[position + 2] = 0x80 | ((code >> 6) & 0x3F)
    out[position + 3] = 0x80 | (code & 0x3F)
    return position + 4


@numba.njit(cache=True)
def _segment(codes, ids, n, best, starts, pieces, tables):  # type: ignore[no-untyped-def]
    """Viterbi over codes[:n] (char ids in ids): fills starts/pieces of the best path's ends."""
    char_ids, root_children, edge_keys, edge_nodes, node_pieces, scores, unknown = tables
    width = len(root_children)
    for i in range(n + 1):
        starts[i] = -1
    best[0] = np.float32(0.0)
    for start in range(n):
        here = best[start]
        node = 0
        single = False
        for end in range(start, n):
            node = _child(node, ids[end], width, root_children, edge_keys, edge_nodes)
            if node < 0:
                break
            piece = node_pieces[node]
            if piece >= 0:
                score = scores[piece] + here
                if starts[end + 1] == -1 or score > best[end + 1]:
                    best[end + 1] = score
                    starts[end + 1] = start
                    pieces[end + 1] = piece
                if end == start:
                    single = True
        if not single:
            score = unknown + here
            if starts[start + 1] == -1 or score > best[start + 1]:
                best[start + 1] = score
                starts[start + 1] = start
                pieces[start + 1] = -1


@numba.njit(cache=True)
def _write_line(out, used, codes, n, starts, pieces, path):  # type: ignore[no-untyped-def]
    """Write the best path's pieces, space-separated, then "\n"; return (used, piece count)."""
    count = 0
    end = n
    while end > 0:  # backtrack: path holds the ends of pieces, last piece first
        path[count] = end
        count += 1
        end = starts[end]
    merged = 0
    previous_unknown = False
    for k in range(count - 1, -1, -1):
        end = path[k]
        unknown = pieces[end] == -1
        if not (unknown and previous_unknown):  # SentencePiece merges a run of unknowns
            if merged > 0:
                out[used] = SPACE
                used += 1
            merged += 1
        previous_unknown = unknown
        for i in range(starts[end], end):
            used = _write_utf8(out, used, codes[i])
    out[used] = NEWLINE
    return used + 1, merged


@numba.njit(cache=True)
def _decode_utf8(data, position, stop):  # type: ignore[no-untyped-def]
    """(code point, next position); an invalid or truncated sequence reads as U+FFFD."""
    lead = data[position]
    if lead < 0x80:
        return np.int64(lead), position + 1
    size = 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 0
    if size == 0 or position + size > stop:
        return np.int64(0xFFFD), position + 1
    code = np.int64(lead & (0x7F >> size))
    for i in range(1, size):
        code = (code << 6) | (data[position + i] & 0x3F)
    return code, position + size


OK, UNSAFE_TEXT, FULL = 0, 1, 2


@numba.njit(cache=True)
def _tokenize_text(data, position, stop, index, pool, tables, buffers, out, used, lines, row):  # type: ignore[no-untyped-def]
    """Tokenize one text into out[used:] and lines[:, lines_used:]: (status, used, lines used).

    `status` is FULL when a buffer is too small (the caller grows them and calls again).
    """
    codes, ids, best, starts, pieces, path = buffers
    char_ids = tables[0]
    word_start_id = char_ids[WORD_START] if WORD_START < len(char_ids) else 0
    n_lines = lines[2, 0]
    n = 0
    pending_space = False
    while position <= stop:
        if position == stop:  # the text's end ends its last line
            code, position = np.int64(NEWLINE), position + 1
        else:
            code, position = _decode_utf8(data, position, stop)
        k = index[code]
        if k == UNSAFE:
            return UNSAFE_TEXT, used, n_lines
        for j in range(1 if k == IDENTITY else pool[k]):
            c = code if k == IDENTITY else np.int64(pool[k + 1 + j])
            if c == NEWLINE:
                if n > 0:
                    if used + 5 * n + 1 > len(out) or n_lines + 1 >= lines.shape[1]:
                        return FULL, used, n_lines
                    _segment(codes, ids, n, best, starts, pieces, tables)
                    used, count = _write_line(out, used, codes, n, starts, pieces, path)
                    lines[0, n_lines] = row
                    lines[1, n_lines] = count
                    n_lines += 1
                n = 0
                pending_space = False
            elif c == SPACE:
                pending_space = True
            else:
                if n + 2 >= len(codes):
                    return FULL, used, n_lines
                if n == 0 or pending_space:
                    codes[n] = WORD_START
                    ids[n] = word_start_id
                    n += 1
                    pending_space = False
                codes[n] = c
                ids[n] = char_ids[c] if c < len(char_ids) else 0
                n += 1
    return OK, used, n_lines


@numba.njit(cache=True)
def _tokenize(data, offsets, index, pool, tables):  # type: ignore[no-untyped-def]
    n_rows = len(offsets) - 1
    out = np.empty(2 * len(data) + 64, np.uint8)
    lines = np.empty((3, max(16, 2 * n_rows)), np.int64)  # rows 0, 1: text, pieces; [2, 0]: count
    lines[2, 0] = 0
    used = 0
    unsafe = np.zeros(n_rows, np.bool_)
    size = 1024
    row = 0
    while row < n_rows:
        buffers = (
            np.empty(size, np.int64),
            np.empty(size, np.int64),
            np.empty(size + 1, np.float32),
            np.empty(size + 1, np.int64),
            np.empty(size + 1, np.int64),
            np.empty(size + 1, np.int64),
        )
        while row < n_rows:
            status, new_used, n_lines = _tokenize_text(
                data, offsets[row], offsets[row + 1], index, pool, tables, buffers, out, used, lines, row
            )
            if status == FULL:
                break
            if status == OK:
                used = new_used
                lines[2, 0] = n_lines
            else:
                unsafe[row] = True
            row += 1
        if row < n_rows:  # a buffer was too small for this text: grow them all and retry it
            size *= 2
            out = _grow(out, 2 * len(out))
            bigger = np.empty((3, 2 * lines.shape[1]), np.int64)
            bigger[:, : lines.shape[1]] = lines
            lines = bigger
    n_lines = lines[2, 0]
    return out[:used], lines[0, :n_lines].copy(), lines[1, :n_lines].copy(), unsafe
