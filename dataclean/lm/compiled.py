"""Normalize and tokenize a whole Arrow batch in one compiled pass: the input KenLM scores.

For every text of a string array, one numba loop reads the UTF-8 bytes, normalizes each character
through the table of `dataclean.lm.charmap`, splits lines and collapses whitespace (as
`normalize_lines`), segments the words with SentencePiece's unigram Viterbi search over the trie of
`dataclean.lm.unigram`, and writes the pieces, space-separated, one line per "\n", as UTF-8.

Exactly SentencePiece's pieces (`unigram::Model::EncodeOptimized`, sentencepiece 0.2): positions
left to right, pieces starting there shortest first, a candidate replacing the best path to its
end only if its float32 score is strictly higher; a character no single-character piece covers is
an unknown, and a run of unknowns is one piece, as SentencePiece merges them. No piece holds "▁"
past its first character, so every path passes through each word start: a line's search is its
words' searches in turn, each starting from the float32 score the line has reached.

Words repeat, so each word's pieces are cached, with the margin by which its best segmentation
wins at every position (computed in float64 from a zero start). A cached segmentation is reused
only where that margin exceeds the float32 rounding the line's running score can cause, so that
the search would pick it too; ties and near-ties (a run like "0000") are searched every time.

Texts holding a character the table cannot normalize alone (`charmap.UNSAFE`) are flagged and left
out; the caller normalizes those with `normalize_text` and runs them again with `whitespace_table`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

from dataclean.lm.charmap import (
    IDENTITY,
    NEWLINE,
    SPACE,
    UNSAFE,
    CharTable,
    normalization_table,
    whitespace_table,
)
from dataclean.lm.normalize import normalize_text
from dataclean.lm.unigram import UnigramTables, read_unigram

WORD_START = 0x2581  # "▁", SentencePiece's whitespace symbol, starts every word
OK, UNSAFE_TEXT, FULL = 0, 1, 2
# Word cache: longest word cached (code points), entries, and arena sizes per entry.
MAX_CACHED_WORD = 32
CACHE_ENTRIES = 1 << 16
# entries[i]: hash, key start and length, output start and length, path start and length, pieces
_HASH, _KEY, _KEY_LEN, _OUT, _OUT_LEN, _PATH, _PATH_LEN, _COUNT = range(8)
# state: entries used, key arena used, output arena used, path arena used
_ENTRIES_USED, _KEYS_USED, _OUTS_USED, _PATHS_USED = range(4)


def new_cache(entries: int = CACHE_ENTRIES) -> tuple[np.ndarray, ...]:
    """Empty word-cache arrays: (slots, entries, margins, keys, outputs, paths, state)."""
    return (
        np.full(2 * entries, -1, np.int32),
        np.zeros((entries, 8), np.int64),
        np.zeros(entries, np.float64),
        np.zeros(entries * 12, np.int32),
        np.zeros(entries * 40, np.uint8),
        np.zeros(entries * 12, np.float32),
        np.zeros(4, np.int64),
    )


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
def _search(ids, n, offset, best, starts, pieces, tables):  # type: ignore[no-untyped-def]
    """SentencePiece's float32 Viterbi over one word, ids[:n], from the score `offset`."""
    _, root_children, edge_keys, edge_nodes, node_pieces, scores, unknown, _ = tables
    width = len(root_children)
    for i in range(n + 1):
        starts[i] = -1
    best[0] = offset
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
def _offer(best, second, end, value):  # type: ignore[no-untyped-def]
    if value > best[end]:
        second[end] = best[end]
        best[end] = value
    elif value > second[end]:
        second[end] = value


@numba.njit(cache=True)
def _margin(ids, n, best, second, tables):  # type: ignore[no-untyped-def]
    """The smallest lead of the best candidate over the next at any position (float64, from 0)."""
    _, root_children, edge_keys, edge_nodes, node_pieces, scores, unknown, _ = tables
    width = len(root_children)
    best[: n + 1] = -np.inf
    second[: n + 1] = -np.inf
    best[0] = 0.0
    for start in range(n):
        node = 0
        single = False
        for end in range(start, n):
            node = _child(node, ids[end], width, root_children, edge_keys, edge_nodes)
            if node < 0:
                break
            piece = node_pieces[node]
            if piece >= 0:
                _offer(best, second, end + 1, np.float64(scores[piece]) + best[start])
                single = single or end == start
        if not single:
            _offer(best, second, start + 1, np.float64(unknown) + best[start])
    lead = np.inf
    for i in range(1, n + 1):
        lead = min(lead, best[i] - second[i])
    return lead


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
def _write_pieces(codes, n, starts, pieces, path, path_scores, out, used, tables):  # type: ignore[no-untyped-def]
    """Write the best path's pieces, space-separated; return (used, pieces, path length).

    `path_scores` gets the score of each piece on the path, in order (to replay the line score).
    """
    scores, unknown = tables[5], tables[6]
    length = 0
    end = n
    while end > 0:  # backtrack: path holds the ends of pieces, last piece first
        path[length] = end
        length += 1
        end = starts[end]
    count = 0
    previous_unknown = False
    for k in range(length - 1, -1, -1):
        end = path[k]
        piece = pieces[end]
        path_scores[length - 1 - k] = unknown if piece == -1 else scores[piece]
        if not (piece == -1 and previous_unknown):  # SentencePiece merges a run of unknowns
            if count > 0:
                out[used] = SPACE
                used += 1
            count += 1
        previous_unknown = piece == -1
        for i in range(starts[end], end):
            used = _write_utf8(out, used, codes[i])
    return used, count, length


@numba.njit(cache=True)
def _hash(codes, n):  # type: ignore[no-untyped-def]
    h = np.int64(-3750763034362895579)  # FNV-1a, 64 bits
    for i in range(n):
        h = (h ^ codes[i]) * np.int64(1099511628211)
    return h


@numba.njit(cache=True)
def _find(slots, entries, keys, h, codes, n):  # type: ignore[no-untyped-def]
    """(entry or -1, the slot where it is or would go)."""
    mask = len(slots) - 1
    slot = h & mask
    while True:
        entry = slots[slot]
        if entry == -1:
            return -1, slot
        if entries[entry, _HASH] == h and entries[entry, _KEY_LEN] == n:
            key = entries[entry, _KEY]
            same = True
            for i in range(n):
                if keys[key + i] != codes[i]:
                    same = False
                    break
            if same:
                return entry, slot
        slot = (slot + 1) & mask


@numba.njit(cache=True)
def _insert(cache, slot, h, codes, n, out, start, stop, path_scores, length, count, margin):  # type: ignore[no-untyped-def]
    slots, entries, margins, keys, outputs, paths, state = cache
    if (
        state[_ENTRIES_USED] + 1 > len(entries)
        or 2 * (state[_ENTRIES_USED] + 1) > len(slots)
        or state[_KEYS_USED] + n > len(keys)
        or state[_OUTS_USED] + stop - start > len(outputs)
        or state[_PATHS_USED] + length > len(paths)
    ):
        slots[:] = -1  # full: start over
        state[:] = 0
        _, slot = _find(slots, entries, keys, h, codes, n)
    entry = state[_ENTRIES_USED]
    key, output, path = state[_KEYS_USED], state[_OUTS_USED], state[_PATHS_USED]
    entries[entry, _HASH], entries[entry, _KEY], entries[entry, _KEY_LEN] = h, key, n
    entries[entry, _OUT], entries[entry, _OUT_LEN] = output, stop - start
    entries[entry, _PATH], entries[entry, _PATH_LEN], entries[entry, _COUNT] = path, length, count
    margins[entry] = margin
    for i in range(n):
        keys[key + i] = codes[i]
    for i in range(stop - start):
        outputs[output + i] = out[start + i]
    for i in range(length):
        paths[path + i] = path_scores[i]
    state[_ENTRIES_USED] += 1
    state[_KEYS_USED] += n
    state[_OUTS_USED] += stop - start
    state[_PATHS_USED] += length
    slots[slot] = entry


@numba.njit(cache=True)
def _grow(array, used, needed):  # type: ignore[no-untyped-def]
    """`array`, or a copy of its first `used` items with room for at least `needed` items."""
    if needed <= len(array):
        return array
    bigger = np.empty(max(needed, 2 * len(array)), array.dtype)
    bigger[:used] = array[:used]
    return bigger


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


@numba.njit(cache=True)
def _search_word(codes, ids, n, offset, out, used, buffers, tables, cache, slot, h, rounding):  # type: ignore[no-untyped-def]
    """Search one word, write its pieces at out[used:], cache it if it is short (`slot` >= 0).

    Returns (used, pieces, the line's score after the word).
    """
    best, starts, pieces, path, path_scores, best64, second64 = buffers
    _search(ids, n, offset, best, starts, pieces, tables)
    start = used
    used, count, length = _write_pieces(codes, n, starts, pieces, path, path_scores, out, used, tables)
    if slot >= 0:
        margin = _margin(ids, n, best64, second64, tables)
        if not margin > rounding:
            margin = -1.0  # this search may differ from the margin's segmentation: never reuse it
        _insert(cache, slot, h, codes, n, out, start, used, path_scores, length, count, margin)
    return used, count, best[n]


@numba.njit(cache=True)
def _new_buffers(size):  # type: ignore[no-untyped-def]
    return (
        np.empty(size, np.int64),  # the word's code points
        np.empty(size, np.int64),  # and char ids;
        (
            np.empty(size + 1, np.float32),  # Viterbi: best score to each position,
            np.empty(size + 1, np.int64),  # where its last piece starts,
            np.empty(size + 1, np.int64),  # which piece it is;
            np.empty(size + 1, np.int64),  # the best path: its pieces' ends
            np.empty(size + 1, np.float32),  # and scores;
            np.empty(size + 1, np.float64),  # margin search: best
            np.empty(size + 1, np.float64),  # and second best
        ),
    )


@numba.njit(cache=True)
def _tokenize(data, offsets, index, pool, expansion, tables, cache):  # type: ignore[no-untyped-def]
    """Tokenize each text data[offsets[i]:offsets[i + 1]].

    Returns (UTF-8 lines, each line's text, each line's pieces, unsafe texts). Arrays are taken
    out of their tuples here, once: per-word work touches no tuple (numba counts references to
    arrays taken from tuples, which would cost more than the work itself).
    """
    char_ids, magnitude = tables[0], tables[7]
    slots, entries, margins, keys, outputs, paths, _ = cache
    n_rows = len(offsets) - 1
    out = np.empty(2 * (offsets[-1] - offsets[0]) + 64, np.uint8)
    lines = np.empty((2, n_rows + 16), np.int64)  # each line's text and piece count
    unsafe = np.zeros(n_rows, np.bool_)
    codes, ids, buffers = _new_buffers(16)
    used, n_lines = 0, 0
    word_start_id = char_ids[WORD_START]
    for row in range(n_rows):
        position, stop = offsets[row], offsets[row + 1]
        # Room for the worst case of this text: every character a one-character word.
        most = expansion * (stop - position) + 2
        out = _grow(out, used, used + 9 * most)
        if n_lines + most > lines.shape[1]:
            more = np.empty((2, max(n_lines + most, 2 * lines.shape[1])), np.int64)
            more[:, :n_lines] = lines[:, :n_lines]
            lines = more
        if most > len(codes):
            codes, ids, buffers = _new_buffers(2 * most)
        row_used, row_lines = used, n_lines
        n = 0  # length of the current word (with its "▁"); 0: no line started
        line_pieces = 0
        line_score = np.float32(0.0)
        pending_space = False
        while position <= stop:
            if position == stop:  # the text's end ends its last line
                code, position = np.int64(NEWLINE), position + 1
            else:
                code, position = _decode_utf8(data, position, stop)
            k = index[code]
            if k == UNSAFE:
                unsafe[row] = True
                used, n_lines = row_used, row_lines
                break
            for j in range(1 if k == IDENTITY else pool[k]):
                c = code if k == IDENTITY else np.int64(pool[k + 1 + j])
                if c == SPACE:
                    pending_space = n > 0
                    continue
                if n > 0 and (c == NEWLINE or pending_space):  # the word is complete
                    if line_pieces > 0:
                        out[used] = SPACE
                        used += 1
                    # A cached segmentation is reused where its margin exceeds twice the
                    # rounding float32 sums from `line_score` can cause (module docstring).
                    rounding = (n + 1) * (abs(np.float64(line_score)) + (n + 1) * magnitude) * 2.0**-22
                    entry, slot, h = -1, -1, np.int64(0)
                    if n <= MAX_CACHED_WORD:
                        h = _hash(codes, n)
                        entry, slot = _find(slots, entries, keys, h, codes, n)
                    if entry >= 0 and margins[entry] > rounding:
                        start, size = entries[entry, _OUT], entries[entry, _OUT_LEN]
                        for i in range(size):
                            out[used + i] = outputs[start + i]
                        used += size
                        path = entries[entry, _PATH]
                        for i in range(path, path + entries[entry, _PATH_LEN]):
                            line_score = paths[i] + line_score
                        line_pieces += entries[entry, _COUNT]
                    else:
                        used, count, line_score = _search_word(
                            codes, ids, n, line_score, out, used, buffers, tables, cache,
                            slot if entry < 0 else -1, h, rounding,
                        )
                        line_pieces += count
                    n = 0
                if c == NEWLINE:
                    if line_pieces > 0:
                        out[used] = NEWLINE
                        used += 1
                        lines[0, n_lines] = row
                        lines[1, n_lines] = line_pieces
                        n_lines += 1
                    line_pieces = 0
                    line_score = np.float32(0.0)
                    pending_space = False
                    continue
                if n == 0:
                    codes[0] = WORD_START
                    ids[0] = word_start_id
                    n = 1
                    pending_space = False
                codes[n] = c
                ids[n] = char_ids[c] if c < len(char_ids) else 0
                n += 1
    return out[:used], lines[0, :n_lines].copy(), lines[1, :n_lines].copy(), unsafe


@dataclass
class Tokenized:
    """The tokenized lines of a batch of texts, in text order."""

    lines: list[bytes]  # UTF-8 pieces separated by single spaces: what KenLM's `score` reads
    texts: np.ndarray  # the index of the text each line is from
    pieces: np.ndarray  # pieces in each line


def text_buffers(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, int64 offsets of each text in them) of a string array; nulls are ""."""
    array = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    if not pa.types.is_string(array.type):
        array = array.cast(pa.large_string())
    if array.null_count:
        array = array.fill_null("")
    _, offset_buffer, data_buffer = array.buffers()
    width = np.int32 if pa.types.is_string(array.type) else np.int64
    offsets = np.frombuffer(offset_buffer, width)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(1, np.uint8)
    return data, offsets.astype(np.int64)


class CompiledTokenizer:
    """Normalizes and tokenizes string arrays in one compiled pass (module docstring).

    Gives the lines and pieces `normalize_lines` and SentencePiece give; keeps a word cache
    between calls, so one instance must not be used by two threads at once.
    """

    def __init__(self, tables: UnigramTables) -> None:
        self.tables = (
            tables.char_ids,
            tables.root_children,
            tables.edge_keys,
            tables.edge_nodes,
            tables.node_pieces,
            tables.scores,
            tables.unknown_score,
            float(max(np.abs(tables.scores).max(), abs(tables.unknown_score))),
        )
        self.cache = new_cache()

    def tokenize(self, texts: pa.Array | pa.ChunkedArray) -> Tokenized:
        """Normalize and tokenize every text; texts the table cannot normalize alone go through
        `normalize_text` first (`dataclean.lm.charmap`)."""
        tokenized, unsafe = self._run(texts, normalization_table())
        rows = np.flatnonzero(unsafe)
        if len(rows) == 0:
            return tokenized
        normalized = [normalize_text(t) for t in pa.array(texts).take(rows).fill_null("").to_pylist()]
        again, _ = self._run(pa.array(normalized, pa.string()), whitespace_table())
        order = np.argsort(np.concatenate((tokenized.texts, rows[again.texts])), kind="stable")
        lines = tokenized.lines + again.lines
        return Tokenized(
            lines=[lines[i] for i in order],
            texts=np.concatenate((tokenized.texts, rows[again.texts]))[order],
            pieces=np.concatenate((tokenized.pieces, again.pieces))[order],
        )

    def _run(self, texts: pa.Array | pa.ChunkedArray, table: CharTable) -> tuple[Tokenized, np.ndarray]:
        data, offsets = text_buffers(texts)
        out, line_texts, pieces, unsafe = _tokenize(
            data, offsets, table.index, table.pool, table.expansion, self.tables, self.cache
        )
        lines = out.tobytes().split(b"\n")[:-1] if len(out) else []
        return Tokenized(lines, line_texts, pieces), unsafe


def compile_tokenizer(model_proto: bytes) -> CompiledTokenizer | None:
    """The compiled tokenizer of a SentencePiece model, or None if it is not one we reproduce."""
    tables = read_unigram(model_proto)
    return CompiledTokenizer(tables) if tables is not None else None
