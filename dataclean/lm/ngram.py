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
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from dataclean.jit import helper
from dataclean.lm.arpa import BOS, EOS, NGRAM, ORDER, UNK, NgramTables, word_hashes

_SPACE, _NEWLINE = 32, 10


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


@numba.njit(cache=True, nogil=True)
def _score(ids, line_pieces, text, piece_words, words, tables, specials, state, out):  # type: ignore[no-untyped-def]
    """out[i] = KenLM's score of line i, whose pieces are the next line_pieces[i] of `ids`.

    `tables`: (unigrams, ngrams, table_starts, table_masks) of `arpa.NgramTables`; `state`,
    arrays of the model's order: the previous words, newest first; their backoffs; the backoffs
    of the n-grams ending with the current word."""
    word_bytes, word_offsets, word_keys, word_slots = words
    unigrams, ngrams, starts, masks = tables
    context, backoffs, found = state
    order, bos, eos, unk = specials[ORDER], specials[BOS], specials[EOS], specials[UNK]
    piece = np.int64(0)
    for line in range(len(line_pieces)):
        context[0] = bos
        backoffs[0] = unigrams[bos, 1]
        length = min(np.int64(1), order - 1)
        total = np.float32(0.0)
        for k in range(line_pieces[line] + 1):
            if k == line_pieces[line]:
                word = eos
            else:
                given = ids[piece]
                piece += 1
                if given >= 0:
                    word = piece_words[given]
                else:
                    word = _word_id(text, -given - 1, word_bytes, word_offsets, word_keys, word_slots, unk)
            prob = unigrams[word, 0]
            found[0] = unigrams[word, 1]
            matched = np.int64(1)
            key = np.uint64(word)
            for j in range(length):  # the n-gram of order j + 2 ending with the word
                key = (key * np.uint64(8978948897894561157)) ^ (
                    (np.uint64(1) + np.uint64(context[j])) * np.uint64(17894857484156487943)
                )
                mask = masks[j]
                slot = key & mask
                here = ngrams[starts[j] + slot]["key"]
                while here != key and here != 0:
                    slot = (slot + np.uint64(1)) & mask
                    here = ngrams[starts[j] + slot]["key"]
                if here == 0:
                    break
                prob = ngrams[starts[j] + slot]["prob"]
                found[j + 1] = ngrams[starts[j] + slot]["backoff"]
                matched = j + 2
            for j in range(matched - 1, length):
                prob = prob + backoffs[j]
            total = total + prob
            length = min(matched, order - 1)
            for j in range(length - 1, 0, -1):
                context[j] = context[j - 1]
            context[0] = word
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
        self._state = (np.zeros(order, np.int64), np.zeros(order, np.float32), np.zeros(order, np.float32))
        self._tables = (tables.unigrams, tables.ngrams, tables.table_starts, tables.table_masks)

    def _lookup(self, pieces: Sequence[str]) -> np.ndarray:
        """The model's id of each piece (`<unk>`'s where the model lacks it)."""
        ids = {word: i for i, word in enumerate(self.tables.words())}
        unk = int(self.tables.specials[UNK])
        return np.array([ids.get(piece, unk) for piece in pieces], np.int64)

    def score(self, ids: np.ndarray, line_pieces: np.ndarray, text: np.ndarray) -> np.ndarray:
        """KenLM's log10 probability of each line, with <s> and </s> (module docstring for
        `ids`); `text` the lines' UTF-8 bytes, which negative ids point into."""
        out = np.empty(len(line_pieces), np.float64)
        _score(
            ids,
            line_pieces,
            text,
            self.piece_words,
            self.words,
            self._tables,
            self.tables.specials,
            self._state,
            out,
        )
        return out


def text_ids(text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, pieces per line) that give each piece of `text` (UTF-8 lines, each ended by "\\n",
    pieces separated by single spaces) by its offset: for lines from any tokenizer."""
    ends = np.flatnonzero((text == _SPACE) | (text == _NEWLINE))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    line_ends = np.flatnonzero(text[ends] == _NEWLINE)
    line_pieces = np.diff(np.concatenate(([-1], line_ends))).astype(np.int64)
    return (-1 - starts).astype(np.int32), line_pieces


def compile_scorer() -> None:
    """Compile `_score` (or load it from the cache) on a two-word model built here."""
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
    tables = NgramTables(
        word_bytes=data,
        word_offsets=offsets,
        word_keys=keys,
        word_slots=slots,
        unigrams=np.full((4, 2), -1.0, np.float32),
        ngrams=np.zeros(4, NGRAM),
        table_starts=np.zeros(1, np.uint64),
        table_masks=np.full(1, 3, np.uint64),
        specials=np.array([2, 1, 2, 0], np.int64),
    )
    text = np.frombuffer(b"a a\n", np.uint8).copy()  # writable, as the stage's batches are
    ids, line_pieces = text_ids(text)
    ids[1] = 0  # the second "a" as the tokenizer's piece 0
    NgramScorer(tables, ["a"]).score(ids, line_pieces, text)
