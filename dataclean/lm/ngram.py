"""KenLM's log10 probability of tokenized lines, computed from `dataclean.lm.arpa`'s tables in one
compiled loop per batch.

`kenlm.Model.score(line)` splits the line into Python strings, hashes each word into its
vocabulary and asks the model for each word in turn, one Python call per line. Here the
tokenizer hands over each piece's vocabulary id (`dataclean.lm.compiled`), and one kernel scores
every line of a batch. The arithmetic is KenLM's (`lm/model.cc`, `FullScore`), in float32 as
there: a word's log10 probability is that of the longest n-gram ending with it that the model
holds (found from the shortest up, stopping at the first missing one), plus, in order from the
shortest, the backoffs of the longer contexts; a line's score is the float32 sum over its words
and `</s>`, starting from the context `<s>`. KenLM shortens a context that no n-gram extends; the
tables hold no n-gram without its context and suffix (`arpa.py` refuses such a model), so that
changes nothing here but the lookups it skips. `tests/lm/test_lm_ngram.py` checks the scores
against `kenlm.Model.score` itself, bit for bit.

A piece is given as an id of the tokenizer's vocabulary (mapped to the model's by `piece_words`),
or, negative, as -(1 + the offset of its text in the tokenized bytes) (an unknown-character run,
or every piece when the tokenizer is SentencePiece itself): its text is looked up in the model's
vocabulary by its hash, as KenLM looks up every word.

Speed: a lookup's slot is anywhere in 10 MB of tables, and whether the n-gram is there decides
the next branch, so the lookups of successive words used to wait for memory one after another.
The kernel first turns a line's pieces into the model's word ids, then, while scoring a word,
prefetches the slots of the word `AHEAD` further on (`dataclean.lm.prefetch`); for models up to
order 4 (the bundled ones, `dataclean lm train`'s default) it also unrolls the orders and keeps
the context's backoffs in registers. Against KenLM's Python query on the same pre-tokenized lines
the query went from 0.65x/0.79x of its time to 0.26x-0.38x / 0.22x-0.30x (en/zh,
`bench_perplexity.py`, loaded machine).
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from dataclean.jit import helper
from dataclean.lm.arpa import BOS, EOS, HASH_A, HASH_B, NGRAM, ORDER, UNK, NgramTables, word_hashes
from dataclean.lm.prefetch import prefetch

_SPACE, _NEWLINE = 32, 10
# Words between the one scored and the one whose n-gram slots are prefetched (of 1, 2, 4, 8 and
# 16, 8 and 16 were fastest on the bundled models).
AHEAD = 8
# Models up to this order are scored by `_score`, with the orders unrolled; others by the loop
# of `_score_any_order` (about 1.3x slower on the bundled models).
UNROLLED_ORDER = 4


@helper
def _word_id(text, start, word_bytes, word_offsets, word_keys, word_slots, unk):  # type: ignore[no-untyped-def]
    """The model's id of the piece text[start:] (up to a space or newline), `unk` if none."""
    h = np.uint64(14695981039346656037)
    stop = start
    while stop < len(text) and text[stop] != _SPACE and text[stop] != _NEWLINE:
        h = (h ^ np.uint64(text[stop])) * np.uint64(1099511628211)
        stop += 1
    h = h | np.uint64(1)
    mask = len(word_keys) - 1
    slot = np.int64(h & np.uint64(mask))
    while word_slots[slot] >= 0:
        if word_keys[slot] == h:
            word = word_slots[slot]
            begin = word_offsets[word]
            if word_offsets[word + 1] - begin == stop - start:
                same = True
                for i in range(stop - start):
                    if word_bytes[begin + i] != text[start + i]:
                        same = False
                        break
                if same:
                    return word
        slot = (slot + 1) & mask
    return unk


@helper
def _line_words(ids, piece, n, text, piece_words, words, specials, line_words):  # type: ignore[no-untyped-def]
    """line_words[:n + 2] = <s>, the model's ids of the n pieces from ids[piece], </s>."""
    word_bytes, word_offsets, word_keys, word_slots = words
    line_words[0] = specials[BOS]
    for k in range(n):
        given = ids[piece + k]
        if given >= 0:
            line_words[k + 1] = piece_words[given]
        else:
            unk = specials[UNK]
            line_words[k + 1] = _word_id(
                text, -given - 1, word_bytes, word_offsets, word_keys, word_slots, unk
            )
    line_words[n + 1] = specials[EOS]


@helper
def _extend(key, word):  # type: ignore[no-untyped-def]
    """KenLM's hash of an n-gram's key extended by the word before it (`arpa.HASH_A`)."""
    return (key * HASH_A) ^ ((np.uint64(1) + np.uint64(word)) * HASH_B)


@helper
def _find(ngrams, start, mask, key):  # type: ignore[no-untyped-def]
    """The index of the n-gram `key` in the table of `ngrams` at `start` (`mask` + 1 slots), or
    -1 if the model does not hold it."""
    slot = key & mask
    here = ngrams[start + slot]["key"]
    while here != key and here != 0:
        slot = (slot + np.uint64(1)) & mask
        here = ngrams[start + slot]["key"]
    return np.int64(start + slot) if here != 0 else np.int64(-1)


@helper
def _prefetch_ngrams(line_words, q, ngrams, starts, masks, top):  # type: ignore[no-untyped-def]
    """Prefetch the first slot of each n-gram of order 2 to top + 1 ending with line_words[q]."""
    key = np.uint64(line_words[q])
    for j in range(min(top, q)):
        key = _extend(key, line_words[q - 1 - j])
        prefetch(ngrams, starts[j] + (key & masks[j]))  # type: ignore[call-arg]


@numba.njit(cache=True, nogil=True)
def _score(ids, line_pieces, text, piece_words, words, tables, specials, line_words, out):  # type: ignore[no-untyped-def]
    """out[i] = KenLM's score of line i, whose pieces are the next line_pieces[i] of `ids`, for a
    model of order 4 or less: the orders unrolled, the context's backoffs in registers.

    `tables`: (unigrams, ngrams, table_starts, table_masks) of `arpa.NgramTables`, the starts and
    masks given for three orders (0 for orders the model lacks); `line_words`: room for the
    longest line's words, with <s> and </s>."""
    unigrams, ngrams, starts, masks = tables
    top = min(specials[ORDER] - 1, np.int64(3))  # the longest context a lookup uses
    start2, start3, start4 = starts[0], starts[1], starts[2]
    mask2, mask3, mask4 = masks[0], masks[1], masks[2]
    piece = np.int64(0)
    for line in range(len(line_pieces)):
        n = line_pieces[line]
        _line_words(ids, piece, n, text, piece_words, words, specials, line_words)
        piece += n
        for q in range(1, min(AHEAD, n + 1) + 1):
            _prefetch_ngrams(line_words, q, ngrams, starts, masks, top)
        # backoff1..3: the backoffs of the context's last one, two and three words.
        backoff1, backoff2, backoff3 = unigrams[specials[BOS], 1], np.float32(0.0), np.float32(0.0)
        length = min(np.int64(1), top)  # context words the lookups may use
        total = np.float32(0.0)
        for p in range(1, n + 2):
            if p + AHEAD <= n + 1:
                _prefetch_ngrams(line_words, p + AHEAD, ngrams, starts, masks, top)
            word = line_words[p]
            prob = unigrams[word, 0]
            found1, found2, found3 = unigrams[word, 1], np.float32(0.0), np.float32(0.0)
            matched = np.int64(1)
            key = np.uint64(word)
            if length >= 1:
                key = _extend(key, line_words[p - 1])
                at = _find(ngrams, start2, mask2, key)
                if at >= 0:
                    prob, found2, matched = ngrams[at]["prob"], ngrams[at]["backoff"], 2
                    if length >= 2:
                        key = _extend(key, line_words[p - 2])
                        at = _find(ngrams, start3, mask3, key)
                        if at >= 0:
                            prob, found3, matched = ngrams[at]["prob"], ngrams[at]["backoff"], 3
                            if length >= 3:
                                key = _extend(key, line_words[p - 3])
                                at = _find(ngrams, start4, mask4, key)
                                if at >= 0:
                                    prob, matched = ngrams[at]["prob"], 4
            # The backoffs of the contexts longer than the match, shortest first (float32 sums).
            if matched <= 1 and length >= 1:
                prob = prob + backoff1
            if matched <= 2 and length >= 2:
                prob = prob + backoff2
            if matched <= 3 and length >= 3:
                prob = prob + backoff3
            total = total + prob
            length = min(matched, top)
            backoff1, backoff2, backoff3 = found1, found2, found3
        out[line] = total


@numba.njit(cache=True, nogil=True)
def _score_any_order(ids, line_pieces, text, piece_words, words, tables, specials, state, out):  # type: ignore[no-untyped-def]
    """`_score` for a model of any order: the context's backoffs in `state` (backoffs, found:
    arrays of the model's order), `line_words` its first array."""
    unigrams, ngrams, starts, masks = tables
    line_words, backoffs, found = state
    top = specials[ORDER] - 1
    piece = np.int64(0)
    for line in range(len(line_pieces)):
        n = line_pieces[line]
        _line_words(ids, piece, n, text, piece_words, words, specials, line_words)
        piece += n
        for q in range(1, min(AHEAD, n + 1) + 1):
            _prefetch_ngrams(line_words, q, ngrams, starts, masks, top)
        backoffs[0] = unigrams[specials[BOS], 1]
        length = min(np.int64(1), top)
        total = np.float32(0.0)
        for p in range(1, n + 2):
            if p + AHEAD <= n + 1:
                _prefetch_ngrams(line_words, p + AHEAD, ngrams, starts, masks, top)
            word = line_words[p]
            prob = unigrams[word, 0]
            found[0] = unigrams[word, 1]
            matched = np.int64(1)
            key = np.uint64(word)
            for j in range(length):  # the n-gram of order j + 2 ending with the word
                key = _extend(key, line_words[p - 1 - j])
                at = _find(ngrams, starts[j], masks[j], key)
                if at < 0:
                    break
                prob, found[j + 1], matched = ngrams[at]["prob"], ngrams[at]["backoff"], j + 2
            for j in range(matched - 1, length):
                prob = prob + backoffs[j]
            total = total + prob
            length = min(matched, top)
            for j in range(length):
                backoffs[j] = found[j]
        out[line] = total


class NgramScorer:
    """Scores tokenized lines with an ARPA model's tables as KenLM does (module docstring)."""

    def __init__(self, tables: NgramTables, pieces: Sequence[str] = ()) -> None:
        """`pieces`: the tokenizer's vocabulary by id, whose ids `score` may be given."""
        self.tables = tables
        self.words = (tables.word_bytes, tables.word_offsets, tables.word_keys, tables.word_slots)
        self.piece_words = self._lookup(pieces)
        order = tables.order
        self._backoffs = (np.zeros(order, np.float32), np.zeros(order, np.float32))
        # `_score` reads three orders' starts and masks; a model of a lower order has 0 there.
        missing = np.zeros(max(0, UNROLLED_ORDER - 1 - len(tables.table_starts)), np.uint64)
        starts = np.concatenate((tables.table_starts, missing))
        masks = np.concatenate((tables.table_masks, missing))
        self._tables = (tables.unigrams, tables.ngrams, starts, masks)

    def _lookup(self, pieces: Sequence[str]) -> np.ndarray:
        """The model's id of each piece (`<unk>`'s where the model lacks it)."""
        ids = {word: i for i, word in enumerate(self.tables.words())}
        unk = int(self.tables.specials[UNK])
        return np.array([ids.get(piece, unk) for piece in pieces], np.int64)

    def score(self, ids: np.ndarray, line_pieces: np.ndarray, text: np.ndarray) -> np.ndarray:
        """KenLM's log10 probability of each line, with <s> and </s> (module docstring for
        `ids`); `text` the lines' UTF-8 bytes, which negative ids point into."""
        out = np.empty(len(line_pieces), np.float64)
        line_words = np.empty(int(line_pieces.max(initial=0)) + 2, np.int64)
        given = (ids, line_pieces, text, self.piece_words, self.words, self._tables, self.tables.specials)
        if self.tables.order <= UNROLLED_ORDER:
            _score(*given, line_words, out)
        else:
            _score_any_order(*given, (line_words, *self._backoffs), out)
        return out


def text_ids(text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, pieces per line) that give each piece of `text` (UTF-8 lines, each ended by "\\n",
    pieces separated by single spaces) by its offset: for lines from any tokenizer."""
    ends = np.flatnonzero((text == _SPACE) | (text == _NEWLINE))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    line_ends = np.flatnonzero(text[ends] == _NEWLINE)
    line_pieces = np.diff(np.concatenate(([-1], line_ends))).astype(np.int64)
    return (-1 - starts).astype(np.int32), line_pieces


def compile_scorer(order: int = UNROLLED_ORDER) -> None:
    """Compile the kernel that scores a model of this order (or load it from the cache), on a
    two-word model built here."""
    data = np.frombuffer(b"<unk><s></s>a", np.uint8).copy()
    offsets = np.array([0, 5, 8, 12, 13], np.int64)
    hashes = word_hashes(data, offsets)
    keys = np.zeros(8, np.uint64)
    slots = np.full(8, -1, np.int64)
    for word, h in enumerate(hashes):
        slot = int(h) & 7
        while slots[slot] >= 0:
            slot = (slot + 1) & 7
        keys[slot], slots[slot] = h, word
    orders = max(order - 1, 1)  # tables of 4 empty slots each
    tables = NgramTables(
        word_bytes=data,
        word_offsets=offsets,
        word_keys=keys,
        word_slots=slots,
        unigrams=np.full((4, 2), -1.0, np.float32),
        ngrams=np.zeros(4 * orders, NGRAM),
        table_starts=np.arange(0, 4 * orders, 4, dtype=np.uint64),
        table_masks=np.full(orders, 3, np.uint64),
        specials=np.array([max(order, 2), 1, 2, 0], np.int64),
    )
    text = np.frombuffer(b"a a\n", np.uint8).copy()  # writable, as the stage's batches are
    ids, line_pieces = text_ids(text)
    ids[1] = 0  # the second "a" as the tokenizer's piece 0
    NgramScorer(tables, ["a"]).score(ids, line_pieces, text)
