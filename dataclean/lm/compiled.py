"""Normalize and tokenize a whole Arrow batch in compiled code: the input KenLM scores.

Two numba loops over a string array's UTF-8 bytes. `_normalize` normalizes each character through
the table of `dataclean.lm.charmap`, splits lines and collapses whitespace (as `normalize_lines`)
and cuts words, each starting with "▁" (SentencePiece's whitespace symbol; we prepend the space
that marks a line's first word, see `dataclean.lm.tokenizer`). `_segment` finds each word's pieces
with SentencePiece's unigram Viterbi search over the trie of `dataclean.lm.unigram`, through the
word cache of `dataclean.lm.wordcache`, and writes them, space-separated, one line per "\n".

The pieces are SentencePiece's own (`unigram::Model::EncodeOptimized`, sentencepiece 0.2):
positions left to right, pieces starting there shortest first, a candidate replacing the best path
to its end only if its float32 score is strictly higher; a character no single-character piece
covers is an unknown, and a run of unknowns is one piece, as SentencePiece merges them. A line's
search is its words' searches in turn, from the score the line has reached (see wordcache.py).

Texts holding a character the table cannot normalize alone (`charmap.UNSAFE`) are flagged and left
out; `CompiledTokenizer` normalizes those with `normalize_text` and runs them again.

Speed: numba counts references to the arrays a compiled function is passed, with atomic
operations that cost more than the work of a word; so the per-word loop calls no function that
takes arrays but the small ones LLVM inlines, and the two loops each run over many texts per call.

Compile time (a first run's, `dataclean.jit`): `_tokenize`, the loop over chunks of about 64K
code points that calls the two, is Python, and allocates their arrays; inside the kernels, arrays
are copied element by element, not by slice assignment, which would compile numba's shape-mismatch
error message (its string formatting, about 1 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
import pyarrow as pa

from dataclean.jit import helper
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
from dataclean.lm.prefetch import prefetch
from dataclean.lm.unigram import UnigramTables, child, read_unigram
from dataclean.lm.wordcache import (
    COUNT,
    FNV_OFFSET,
    FNV_PRIME,
    HEADER,
    KEY_LEN,
    MARGIN,
    MAX_CACHED_WORD,
    OUT_LEN,
    PATH_LEN,
    find,
    insert,
    margin,
    new_cache,
    rounding,
)

WORD_START = 0x2581  # "▁"
# SentencePiece >= 0.2.2 rebases a line's running score to 0 whenever, at a search position, it is
# beyond +-1e5 (about 15,000 pieces into a line), subtracting it from every score already reached
# ahead (unigram_model.cc, kScoreResetThreshold). We do the same, so long lines match too.
RESET = np.float32(100000.0)
# Code points normalized per call of `_normalize` (more when one text needs more).
CHUNK = 1 << 16
# Words between the one segmented and the one whose cache slot is prefetched (its record is
# prefetched half way).
AHEAD = 8


@helper
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
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        code = np.int64(0xFFFD)
    return code, position + size


@numba.njit(cache=True, nogil=True)
def _normalize(data, offsets, row, index, pool, expansion, char_ids, codes, ids, ends, unsafe):  # type: ignore[no-untyped-def]
    """Normalize texts from `row` on while they surely fit in `codes`, into words.

    Writes each word's code points and char ids to codes/ids, "▁" first, and in ends[:, k] where
    word k ends, for the last word of a line its text (-1 for the others), and its hash (FNV-1a,
    `wordcache.FNV_OFFSET`).
    Flags unsafe texts. Returns (the next text to do, words written).
    """
    word_start_id = char_ids[WORD_START]
    n = n_words = 0
    h = np.int64(FNV_OFFSET)
    while row < len(offsets) - 1:
        position, stop = offsets[row], offsets[row + 1]
        if n > 0 and n + expansion * (stop - position) + 2 > len(codes):
            break
        text_n, text_words = n, n_words
        in_line = pending_space = False
        while position <= stop:
            if position == stop:  # the text's end ends its last line
                code, position = np.int64(NEWLINE), position + 1
            else:
                code, position = _decode_utf8(data, position, stop)
            k = index[code]
            if k == UNSAFE:
                unsafe[row] = True
                n, n_words = text_n, text_words
                break
            for j in range(1 if k == IDENTITY else pool[k]):
                c = code if k == IDENTITY else np.int64(pool[k + 1 + j])
                if c == SPACE:
                    pending_space = in_line
                elif c == NEWLINE:
                    if in_line:
                        ends[0, n_words], ends[1, n_words], ends[2, n_words] = n, row, h
                        n_words += 1
                    in_line = pending_space = False
                else:
                    if not in_line or pending_space:
                        if in_line:
                            ends[0, n_words], ends[1, n_words], ends[2, n_words] = n, -1, h
                            n_words += 1
                        codes[n] = WORD_START
                        ids[n] = word_start_id
                        n += 1
                        h = (np.int64(FNV_OFFSET) ^ WORD_START) * np.int64(FNV_PRIME)
                        in_line, pending_space = True, False
                    h = (h ^ c) * np.int64(FNV_PRIME)
                    codes[n] = c
                    ids[n] = char_ids[c] if c < len(char_ids) else 0
                    n += 1
        row += 1
    return row, n_words


@numba.njit(cache=True, nogil=True)
def _segment(codes, ids, ends, n_words, tables, cache, work, out, used, lines, n_lines, piece_ids, n_ids):  # type: ignore[no-untyped-def]
    """Write the pieces of the words `_normalize` made, one line per "\n", and their ids to
    piece_ids (`Tokenized.ids`); record each line's text and pieces in lines. Returns (bytes
    used, lines, ids)."""
    _, trie, scores, unknown, magnitude = tables
    root_children, edge_keys, edge_nodes, node_pieces = trie
    slots, arena, floats, octets, _ = cache
    best, starts, pieces, path, path_scores, best64, second64 = work
    width = len(root_children)
    line_score = np.float32(0.0)
    # Counters start as int64, not the literal 0: numba would also compile each callee once for
    # the literal's type while it infers the loop's types (a first run's compile time, for nothing).
    line_pieces = np.int64(0)
    start = np.int64(0)
    for w in range(n_words):
        n = ends[0, w] - start
        if line_pieces > 0:
            out[used] = SPACE
            used += 1
        if line_score < -RESET or line_score > RESET:
            line_score = np.float32(0.0)  # SentencePiece rebases the running score (see RESET)
        # A word is cached, and a cached word reused, only where no rebase can happen inside it.
        cacheable = n <= MAX_CACHED_WORD and abs(line_score) + (n + 1) * magnitude < RESET
        bound = rounding(n, line_score, magnitude)
        entry, slot, h = np.int64(-1), np.int64(-1), ends[2, w]
        if w + AHEAD < n_words:  # a later word's slot, and its record once the slot is in
            prefetch(slots, ends[2, w + AHEAD] & (len(slots) - 1))  # type: ignore[call-arg]
        if w + AHEAD // 2 < n_words:
            ahead = slots[ends[2, w + AHEAD // 2] & (len(slots) - 1)]
            if ahead >= 0:
                prefetch(arena, ahead)  # type: ignore[call-arg]
        if cacheable:
            entry, slot = find(slots, arena, h, codes, start, n)
        if entry >= 0 and floats[entry + MARGIN] > bound:  # cached, and safe to reuse here
            at = entry + HEADER + arena[entry + KEY_LEN]
            count = np.int64(arena[entry + COUNT])
            for i in range(at, at + count):
                given = arena[i]
                piece_ids[n_ids] = given if given >= 0 else given - used  # offset in `out`
                n_ids += 1
            at += count
            for i in range(at, at + arena[entry + PATH_LEN]):
                line_score = floats[i] + line_score
            at = 4 * (at + arena[entry + PATH_LEN])
            for i in range(at, at + arena[entry + OUT_LEN]):
                out[used] = octets[i]
                used += 1
            line_pieces += count
        else:
            # SentencePiece's search over the word, from the line's score.
            for i in range(n + 1):
                starts[i] = -1
            best[0] = line_score
            for begin in range(n):
                here = best[begin]
                if here < -RESET or here > RESET:  # rebase all scores reached so far (RESET)
                    for i in range(begin, n + 1):
                        if i == begin or starts[i] != -1:
                            best[i] = best[i] - here
                    here = np.float32(0.0)
                node = np.int64(0)
                single = False
                for end in range(begin, n):
                    node = child(node, ids[start + end], width, root_children, edge_keys, edge_nodes)
                    if node < 0:
                        break
                    piece = node_pieces[node]
                    if piece >= 0:
                        score = scores[piece] + here
                        if starts[end + 1] == -1 or score > best[end + 1]:
                            best[end + 1], starts[end + 1], pieces[end + 1] = score, begin, piece
                        single = single or end == begin
                if not single:
                    score = unknown + here
                    if starts[begin + 1] == -1 or score > best[begin + 1]:
                        best[begin + 1], starts[begin + 1], pieces[begin + 1] = score, begin, -1
            # Back from the end, then write the pieces in order; a run of unknowns is one piece.
            length = np.int64(0)
            end = n
            while end > 0:
                path[length] = end
                length += 1
                end = starts[end]
            word_used = used
            word_ids = n_ids
            count = np.int64(0)
            previous_unknown = False
            for k in range(length - 1, -1, -1):
                end = path[k]
                piece = pieces[end]
                path_scores[length - 1 - k] = unknown if piece == -1 else scores[piece]
                if not (piece == -1 and previous_unknown):
                    if count > 0:
                        out[used] = SPACE
                        used += 1
                    count += 1
                    piece_ids[n_ids] = piece if piece >= 0 else -1 - used
                    n_ids += 1
                previous_unknown = piece == -1
                for i in range(start + starts[end], start + end):
                    code = codes[i]
                    if code < 0x80:
                        out[used] = code
                        used += 1
                    elif code < 0x800:
                        out[used] = 0xC0 | (code >> 6)
                        out[used + 1] = 0x80 | (code & 0x3F)
                        used += 2
                    elif code < 0x10000:
                        out[used] = 0xE0 | (code >> 12)
                        out[used + 1] = 0x80 | ((code >> 6) & 0x3F)
                        out[used + 2] = 0x80 | (code & 0x3F)
                        used += 3
                    else:
                        out[used] = 0xF0 | (code >> 18)
                        out[used + 1] = 0x80 | ((code >> 12) & 0x3F)
                        out[used + 2] = 0x80 | ((code >> 6) & 0x3F)
                        out[used + 3] = 0x80 | (code & 0x3F)
                        used += 4
            line_score = best[n]
            line_pieces += count
            if cacheable and entry < 0:
                lead = margin(ids, start, n, best64, second64, trie, scores, unknown)
                lead = lead if lead > bound else -1.0  # else this search may not be the lead's
                insert(
                    cache, slot, h, codes, start, n, out, word_used, used, path_scores, length, count, lead,
                    piece_ids, word_ids,
                )  # fmt: skip
        if ends[1, w] >= 0:  # the line ends
            out[used] = NEWLINE
            used += 1
            lines[0, n_lines] = ends[1, w]
            lines[1, n_lines] = line_pieces
            n_lines += 1
            line_score = np.float32(0.0)
            line_pieces = 0
        start = ends[0, w]
    return used, n_lines, n_ids


def _work(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Buffers for `size` code points: codes, char ids, word ends (with texts and hashes), and
    the search's arrays."""
    return (
        np.empty(size, np.int64),
        np.empty(size, np.int64),
        np.empty((3, size), np.int64),
        (
            np.empty(size + 1, np.float32),  # best score to each position,
            np.empty(size + 1, np.int64),  # where its last piece starts,
            np.empty(size + 1, np.int64),  # which piece it is;
            np.empty(size + 1, np.int64),  # the best path: its pieces' ends
            np.empty(size + 1, np.float32),  # and scores;
            np.empty(size + 1, np.float64),  # margin search: best
            np.empty(size + 1, np.float64),  # and second best
        ),
    )


def _tokenize(
    data: np.ndarray,
    offsets: np.ndarray,
    index: np.ndarray,
    pool: np.ndarray,
    expansion: int,
    tables: tuple[Any, ...],
    cache: tuple[np.ndarray, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tokenize each text data[offsets[i]:offsets[i + 1]]: (UTF-8 lines, each line's text, each
    line's pieces, the pieces' ids, unsafe texts)."""
    char_ids = tables[0]
    n_rows = len(offsets) - 1
    out = np.empty(2 * int(offsets[-1] - offsets[0]) + 64, np.uint8)
    piece_ids = np.empty(int(offsets[-1] - offsets[0]) + 64, np.int32)
    lines = np.empty((2, n_rows + 16), np.int64)  # each line's text and piece count
    unsafe = np.zeros(n_rows, np.bool_)
    codes, ids, ends, work = _work(CHUNK)
    used = n_lines = n_ids = row = 0
    while row < n_rows:
        most = expansion * int(offsets[row + 1] - offsets[row]) + 2
        if most > len(codes):
            codes, ids, ends, work = _work(2 * most)
        row, n_words = _normalize(
            data, offsets, row, index, pool, expansion, char_ids, codes, ids, ends, unsafe
        )
        # Room for the worst case: every character a one-character word.
        n_codes = int(ends[0, n_words - 1]) if n_words > 0 else 0
        if used + 9 * n_codes + 1 > len(out):
            bigger = np.empty(max(2 * len(out), used + 9 * n_codes + 1), np.uint8)
            bigger[:used] = out[:used]
            out = bigger
        if n_ids + n_codes + 1 > len(piece_ids):
            more_ids = np.empty(max(2 * len(piece_ids), n_ids + n_codes + 1), np.int32)
            more_ids[:n_ids] = piece_ids[:n_ids]
            piece_ids = more_ids
        if n_lines + n_words > lines.shape[1]:
            more = np.empty((2, max(2 * lines.shape[1], n_lines + n_words)), np.int64)
            more[:, :n_lines] = lines[:, :n_lines]
            lines = more
        used, n_lines, n_ids = _segment(
            codes, ids, ends, n_words, tables, cache, work, out, used, lines, n_lines, piece_ids, n_ids
        )
    return out[:used], lines[0, :n_lines].copy(), lines[1, :n_lines].copy(), piece_ids[:n_ids], unsafe


@dataclass
class Tokenized:
    """The tokenized lines of a batch of texts, in text order.

    `ids` gives each piece as the tokenizer's vocabulary id, or, where the tokenizer has none (a
    run of unknown characters; every piece of lines from SentencePiece itself), as
    -(1 + the offset of its text in `data`): what `dataclean.lm.ngram` scores.
    """

    data: np.ndarray  # the lines, UTF-8, each ended by "\n": pieces separated by single spaces
    texts: np.ndarray  # the index of the text each line is from
    pieces: np.ndarray  # pieces in each line
    ids: np.ndarray  # int32, each piece in turn (see above)

    @property
    def lines(self) -> list[bytes]:
        """Each line's pieces separated by single spaces: what KenLM's `score` reads."""
        return self.data.tobytes().split(b"\n")[:-1] if len(self.data) else []

    @classmethod
    def from_lines(cls, lines: list[str], texts: np.ndarray) -> Tokenized:
        """Lines from any tokenizer (each piece given by its text's offset)."""
        data = np.frombuffer("".join(line + "\n" for line in lines).encode("utf-8"), np.uint8)
        pieces = np.array([line.count(" ") + 1 for line in lines], np.int64)
        ends = np.flatnonzero((data == SPACE) | (data == NEWLINE))
        starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
        return cls(data, np.asarray(texts, np.int64), pieces, (-1 - starts).astype(np.int32))


def _merge(first: Tokenized, second: Tokenized) -> Tokenized:
    """The lines of both, in text order (stable: a text's lines keep their order)."""
    texts = np.concatenate((first.texts, second.texts))
    order = np.argsort(texts, kind="stable")
    data = np.concatenate((first.data, second.data))
    ids = np.concatenate(
        (first.ids, second.ids.astype(np.int64) - np.where(second.ids < 0, len(first.data), 0))
    )
    line_bytes = np.diff(np.concatenate(([-1], np.flatnonzero(data == NEWLINE))))
    pieces = np.concatenate((first.pieces, second.pieces))
    byte_start = np.concatenate(([0], np.cumsum(line_bytes)[:-1]))
    piece_start = np.concatenate(([0], np.cumsum(pieces)[:-1]))
    new_byte_start = np.concatenate(([0], np.cumsum(line_bytes[order])[:-1]))
    new_data = data[_ranges(byte_start[order], line_bytes[order])]
    picked = _ranges(piece_start[order], pieces[order])
    new_ids = ids[picked]
    # An offset into `data` moves with its line.
    shift = np.repeat(new_byte_start - byte_start[order], pieces[order])
    new_ids = np.where(new_ids < 0, new_ids - shift, new_ids)
    return Tokenized(new_data, texts[order], pieces[order], new_ids.astype(np.int32))


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(start, start + length) for each pair."""
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    ranges: np.ndarray = np.repeat(starts, lengths) + within
    return ranges


def text_buffers(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, int64 offsets of each text in them) of a string array; nulls are ""."""
    array = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
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
            (tables.root_children, tables.edge_keys, tables.edge_nodes, tables.node_pieces),
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
        normalized = [normalize_text(t or "") for t in texts.take(pa.array(rows)).to_pylist()]
        again, _ = self._run(pa.array(normalized, pa.string()), whitespace_table())
        again.texts = rows[again.texts]
        return _merge(tokenized, again)

    def _run(self, texts: pa.Array | pa.ChunkedArray, table: CharTable) -> tuple[Tokenized, np.ndarray]:
        data, offsets = text_buffers(texts)
        out, line_texts, pieces, ids, unsafe = _tokenize(
            data, offsets, table.index, table.pool, table.expansion, self.tables, self.cache
        )
        return Tokenized(out, line_texts, pieces, ids), unsafe


def compile_tokenizer(model_proto: bytes) -> CompiledTokenizer | None:
    """The compiled tokenizer of a SentencePiece model, or None if it is not one we reproduce."""
    tables = read_unigram(model_proto)
    return CompiledTokenizer(tables) if tables is not None else None


def compile_kernels(model_proto: bytes) -> bool:
    """Compile this module's kernels (or load them from the cache) by tokenizing a few short
    texts; False, compiling nothing, if the model's tokenizer is not one this module reproduces."""
    tokenizer = compile_tokenizer(model_proto)
    if tokenizer is None:
        return False
    tokenizer.tokenize(pa.array(["Compiled once.\nWords, 2 lines.", "编译一次。", ""], pa.string()))
    return True


def count_words(texts: pa.Array | pa.ChunkedArray) -> int:
    """Normalize the texts and cut their words, without tokenizing: the words they hold.

    The first half of `CompiledTokenizer.tokenize` alone, for the benchmark's breakdown.
    """
    data, offsets = text_buffers(texts)
    table = normalization_table()
    return int(_count_words(data, offsets, table.index, table.pool, table.expansion))


def _count_words(
    data: np.ndarray, offsets: np.ndarray, index: np.ndarray, pool: np.ndarray, expansion: int
) -> int:
    char_ids = np.zeros(WORD_START + 1, np.int64)
    codes, ids, ends, _ = _work(CHUNK)
    unsafe = np.zeros(len(offsets) - 1, np.bool_)
    words = row = 0
    while row < len(offsets) - 1:
        most = expansion * int(offsets[row + 1] - offsets[row]) + 2
        if most > len(codes):
            codes, ids, ends, _ = _work(2 * most)
        row, n_words = _normalize(
            data, offsets, row, index, pool, expansion, char_ids, codes, ids, ends, unsafe
        )
        words += n_words
    return int(words)
