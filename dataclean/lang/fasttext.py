"""fastText supervised-model inference as a numba kernel over an Arrow batch (lid.176 and its kin).

`read_model` (`dataclean.lang.model_file`) reads a fastText model file (`.ftz`, quantized, or
`.bin`) into numpy arrays; `predict` gives, for every text of a batch (its UTF-8 buffer), the most
probable label and its probability, and the probabilities of a few labels asked for, from the
text's first `max_chars` characters. It computes what fastText's own `predict` computes on the
same characters as one line (fastText C++ 0.9, `Dictionary::getLine` and `Model::predict`):

- tokens are runs of bytes between ASCII whitespace (space, tab, newline, CR, VT, FF, NUL); a
  newline inside the text is a space, as CCNet and datatrove feed fastText; `</s>` ends the line
  (appended, and where the text itself has one the rest is not read, as in fastText);
  tokens starting with `__label__` are labels and ignored;
- a token in the vocabulary contributes its own row, then its character n-grams'; any other token
  its character n-grams' only: the n-grams of `<token>` of `minn` to `maxn` characters, each
  hashed with 32-bit FNV-1a over its bytes (sign-extended, as fastText does) modulo `bucket`; in a
  pruned (quantized) model only the buckets that survived pruning count;
- a model trained with word n-grams (`-wordNgrams N`, N > 1) adds, after the tokens' rows and
  `</s>`'s, one row per run of 2 to N consecutive tokens (`</s>` included): the 64-bit rolling hash
  `h * 116049371 + next` of the tokens' FNV hashes (each sign-extended from 32 bits) modulo
  `bucket` (`Dictionary::addWordNgrams`), again only kept buckets in a pruned model;
- the hidden vector is the mean of those rows, summed in float32 in fastText's order (a quantized
  row is its norm times its product-quantizer centroids, multiplied as fastText does);
- the output layer (hierarchical softmax, lid.176's; softmax; one-vs-all) is
  `dataclean.lang.fasttext_loss`.
`predict(..., exact=False)` scores a softmax or hierarchical-softmax model of few labels (a
classifier's) through its projected rows instead (`dataclean.lang.fasttext_projected`: each input
row's dot products with the output rows, averaged in float64), to fastText's float32 rounding.

Why not fastText's own binding: `fasttext-predict` (the inference-only build) labels about 7 MB/s
per core on the first 2,000 characters of web documents, a per-call and per-n-gram cost (a string
per n-gram, a hash map per lookup); this loop walks the Arrow buffer once, with no object per
token. Per n-gram it hashes the bytes, reduces the hash modulo `bucket` with two multiplications
and finds a pruned bucket's row in a bitmap (`model_file`); a word seen before in the batch (up
to 32 bytes) reuses the list of rows it added, in the same order, so the float32 sums are the
same. A word of up to 8 bytes is found in the vocabulary with one read (`model_file`). A text's
rows are listed first and summed after, in the same order, each row's cache lines fetched 16
rows ahead: a classifier's word n-gram rows are spread over hundreds of MB, and waiting for each
in turn was most of the time of a whole document. The tests compare its labels and
probabilities with fastText's own on real text, for every supervised model shape.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from dataclean.jit import helper
from dataclean.lang.fasttext_loss import label_probabilities
from dataclean.lang.fasttext_projected import projected_model
from dataclean.lang.model_file import FastTextModel, fnv_hash, read_model
from dataclean.text.utf8 import utf8_buffers

__all__ = ["FastTextModel", "Prediction", "hidden_vectors", "predict", "read_model", "utf8_buffers"]

_LABEL_PREFIX = b"__label__"
# The per-batch cache of tokens' rows (`_hidden_kernel`): tokens up to this many bytes (words;
# a run of Chinese is a long token that seldom repeats), slots (a power of 2) and rows it holds.
_CACHED_BYTES = 32
_CACHE_SLOTS = 1 << 16
_CACHE_ROWS = 1 << 19
_FNV_OFFSET = np.uint32(2166136261)
# Rows ahead whose cache lines `_add_rows` asks for (16 floats, 64 bytes, a line).
_PREFETCH_AHEAD = 16
# fastText's multiplier of the rolling hash of word n-grams (`Dictionary::addWordNgrams`).
_WORD_NGRAM_MULTIPLIER = np.uint64(116049371)


@helper
def _fnv_byte(h: np.uint32, byte: np.uint8) -> np.uint32:
    # numba widens uint32 arithmetic to 64 bits: truncate back, as the C++ uint32_t product wraps.
    return _fnv_step(h, _signed_byte(byte))


@helper
def _signed_byte(byte: np.uint8) -> np.uint64:
    """A byte as fastText hashes it: a char, sign-extended to 32 bits."""
    return np.uint64(byte) | np.uint64(0xFFFFFF00) if byte >= 0x80 else np.uint64(byte)


@helper
def _fnv_step(h: np.uint32, signed: np.uint64) -> np.uint32:
    return np.uint32((np.uint64(h) ^ signed) * np.uint64(16777619) & np.uint64(0xFFFFFFFF))


@intrinsic
def _popcount(typingctx: Any, x: Any) -> Any:
    """The number of bits set in a uint64 (one instruction)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    return types.uint64(types.uint64), codegen


@intrinsic
def _mul_high(typingctx: Any, a: Any, b: Any) -> Any:
    """The high 64 bits of the 128-bit product of two uint64."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return types.uint64(types.uint64, types.uint64), codegen


@helper
def _sign_extended(h: np.uint32) -> np.uint64:
    """A 32-bit hash as fastText widens it for word n-grams: an int32, sign-extended to 64 bits."""
    return np.uint64(h) | np.uint64(0xFFFFFFFF00000000) if h >= np.uint32(0x80000000) else np.uint64(h)


@helper
def _bucket_row(key: np.int64, pruned: bool, bits: np.ndarray, ranks: np.ndarray, nwords: int) -> np.int64:
    """The input row of n-gram bucket `key`: nwords + key, or in a pruned model the kept bucket's
    row from the bitmap (-1 when the bucket was pruned)."""
    if not pruned:
        return np.int64(nwords + key)
    word = bits[key >> 6]
    bit = np.uint64(key & 63)
    one = np.uint64(1)
    if (word >> bit) & one:
        return np.int64(ranks[key >> 6] + np.int64(_popcount(word & ((one << bit) - one))))  # type: ignore[call-arg]
    return np.int64(-1)


@intrinsic
def _prefetch(typingctx: Any, array: Any, row: Any, column: Any) -> Any:
    """Ask the CPU to bring array[row, column]'s cache line in (LLVM's prefetch: read, keep)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        kind = signature.args[0]
        view = context.make_array(kind)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, kind, view, [args[1], args[2]])  # type: ignore[no-untyped-call]
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        signature_type = ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32])
        function = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module, signature_type, "llvm.prefetch.p0"
        )
        flags = [ir.Constant(int32, 0), ir.Constant(int32, 3), ir.Constant(int32, 1)]
        builder.call(function, [builder.bitcast(pointer, byte_pointer), *flags])
        return context.get_dummy_value()

    return types.void(array, types.int64, types.int64), codegen


@helper
def _add_rows(rows: np.ndarray, line: np.ndarray, count: int, hidden: np.ndarray) -> None:
    """hidden += rows[line[0]], ..., rows[line[count - 1]], in that order (fastText's float32
    sums), each row's cache lines asked for _PREFETCH_AHEAD rows before it is added: a model's
    n-gram rows are scattered over hundreds of MB, and waiting for each in turn was most of the time."""
    dim = rows.shape[1]
    for k in range(count):
        if k + _PREFETCH_AHEAD < count:
            ahead = np.int64(line[k + _PREFETCH_AHEAD])
            for d in range(0, dim, 16):
                _prefetch(rows, ahead, np.int64(d))  # type: ignore[call-arg]
            _prefetch(rows, ahead, np.int64(dim - 1))  # type: ignore[call-arg]  # a row need not start a line
        row = line[k]
        for d in range(dim):
            hidden[d] += rows[row, d]


@helper
def _is_end_of_line(data: np.ndarray, i: int) -> bool:
    """Whether the 4 bytes at data[i] are `</s>`."""
    return data[i] == 60 and data[i + 1] == 47 and data[i + 2] == 115 and data[i + 3] == 62


@helper
def _is_space(byte: np.uint8) -> bool:
    return byte == 32 or byte == 10 or byte == 13 or byte == 9 or byte == 11 or byte == 12 or byte == 0


@nb.njit(cache=True, nogil=True)
def _sample_end_kernel(data: np.ndarray, offsets: np.ndarray, max_chars: int, ends: np.ndarray) -> None:
    n = len(offsets) - 1
    for t in range(n):
        end, stop, chars = offsets[t], offsets[t + 1], 0
        if stop - end <= max_chars:
            end = stop  # no more characters than bytes: the whole text (a classifier's case)
        while end < stop:
            if (data[end] & 0xC0) != 0x80:
                if chars == max_chars:
                    break
                chars += 1
            end += 1
        ends[t] = end


def _sample_ends(data: np.ndarray, offsets: np.ndarray, max_chars: int) -> np.ndarray:
    """The byte offset where each text's first `max_chars` characters end."""
    ends = np.empty(len(offsets) - 1, np.int64)
    _sample_end_kernel(data, offsets, max_chars, ends)
    return ends


@nb.njit(cache=True, nogil=True)
def _hidden_kernel(
    data: np.ndarray,
    offsets: np.ndarray,
    max_chars: int,
    rows: np.ndarray,
    word_bytes: np.ndarray,
    word_offsets: np.ndarray,
    word_slots: np.ndarray,
    bucket_bits: np.ndarray,
    bucket_ranks: np.ndarray,
    pruned: bool,
    nwords: int,
    eos: int,
    minn: int,
    maxn: int,
    bucket: int,
    word_ngrams: int,
    eos_hash: np.uint64,
    ends: np.ndarray,
    hiddens: np.ndarray,
    token: np.ndarray,
    char_starts: np.ndarray,
    cache: np.ndarray,
    cached_rows: np.ndarray,
    hashes: np.ndarray,
    line: np.ndarray,
) -> None:
    """The hidden vector of each text up to ends[text] (its first `max_chars` characters) into
    hiddens[text] (zeros). The caller allocates it and the scratch arrays (`hidden_vectors`)."""
    n = len(offsets) - 1
    dim = rows.shape[1]
    word_mask = len(word_slots) - 1
    # key % bucket as two multiplications (Lemire's fastmod), for a 32-bit key.
    buckets = np.uint64(bucket if bucket > 1 else 1)  # (no builtin max: one compile less)
    inverse = np.uint64(0xFFFFFFFFFFFFFFFF) // buckets + np.uint64(1)
    # key % bucket for a 64-bit key (word n-grams): Barrett's quotient, at most 2 short.
    barrett = np.uint64(0xFFFFFFFFFFFFFFFF) // buckets
    # Without character n-grams a token is its word row: no "<token>" and no per-batch cache
    # (a cache probe would cost what the vocabulary probe costs).
    subwords = maxn > 0
    cache_mask = _CACHE_SLOTS - 1
    filled = 0
    entries = 0
    for t in range(n):
        end = ends[t]
        hidden = hiddens[t]
        count = 0
        tokens = 0  # the FNV hash of each token, sign-extended to 64 bits, for word n-grams
        i = offsets[t]
        while i < end:
            if _is_space(data[i]):
                i += 1
                continue
            j = i
            h = _FNV_OFFSET
            while j < end and not _is_space(data[j]):
                h = _fnv_byte(h, data[j])
                j += 1
            length = j - i
            if length >= 9:
                is_label = True
                for k in range(9):
                    if data[i + k] != _LABEL_BYTES[k]:
                        is_label = False
                        break
                if is_label:
                    i = j
                    continue
            if length == 4 and _is_end_of_line(data, i):
                break  # a literal `</s>` ends fastText's line there, as its newline would
            hashes[tokens] = _sign_extended(h)
            tokens += 1
            # A token seen before: its rows again, in the same order (the same float32 sums).
            record = False
            if subwords and length <= _CACHED_BYTES:
                entry = h & cache_mask
                hit = False
                while cache[entry, 0] >= 0:
                    if cache[entry, 1] == length:
                        at = cache[entry, 0]
                        hit = True
                        for k in range(length):
                            if data[at + k] != data[i + k]:
                                hit = False
                                break
                        if hit:
                            break
                    entry = (entry + 1) & cache_mask
                if hit:
                    first = cache[entry, 2]
                    for e in range(first, first + cache[entry, 3]):
                        line[count] = cached_rows[e]
                        count += 1
                    i = j
                    continue
                # Room for the token's rows: its word, and at most maxn n-grams per character.
                record = entries * 2 < _CACHE_SLOTS and filled + 1 + maxn * (length + 2) <= _CACHE_ROWS
                first = filled
            # Vocabulary lookup: a slot holds the word's id and length, and its first 8 bytes,
            # so that a word of up to 8 bytes is found in one read.
            prefix = np.uint64(0)
            for k in range(length if length < 8 else 8):
                prefix |= np.uint64(data[i + k]) << np.uint64(8 * k)
            key = np.int64(prefix)
            slot = h & word_mask
            wid = -1
            while word_slots[slot, 0] >= 0:
                packed = word_slots[slot, 0]
                if (packed >> 32) == length and word_slots[slot, 1] == key:
                    cand = packed & 0xFFFFFFFF
                    same = True
                    if length > 8:
                        a = word_offsets[cand]
                        for k in range(8, length):
                            if word_bytes[a + k] != data[i + k]:
                                same = False
                                break
                    if same:
                        wid = cand
                        break
                slot = (slot + 1) & word_mask
            if wid >= 0:
                line[count] = wid
                count += 1
                if record:
                    cached_rows[filled] = wid
                    filled += 1
            if not subwords:
                i = j
                continue
            # "<token>": "<" is character 0, the token's characters follow, ">" is the last.
            token[0] = np.uint64(60)
            char_starts[0] = 0
            nch = 1
            for k in range(length):
                byte = data[i + k]
                token[k + 1] = _signed_byte(byte)
                if (byte & 0xC0) != 0x80:
                    char_starts[nch] = k + 1
                    nch += 1
            token[length + 1] = np.uint64(62)
            char_starts[nch] = length + 1
            nch += 1
            char_starts[nch] = length + 2
            for c in range(nch):
                g = _FNV_OFFSET
                for m in range(maxn if maxn < nch - c else nch - c):
                    for r in range(char_starts[c + m], char_starts[c + m + 1]):
                        g = _fnv_step(g, token[r])
                    if m + 1 < minn or (m == 0 and (c == 0 or c == nch - 1)):
                        continue
                    # (mypy reads the intrinsic's typing signature, with its context first.)
                    key = np.int64(_mul_high(inverse * np.uint64(g), buckets))  # type: ignore[call-arg]
                    row = _bucket_row(key, pruned, bucket_bits, bucket_ranks, nwords)
                    if row >= 0:
                        line[count] = row
                        count += 1
                        if record:
                            cached_rows[filled] = row
                            filled += 1
            if record:
                cache[entry, 0], cache[entry, 1] = i, length
                cache[entry, 2], cache[entry, 3] = first, filled - first
                entries += 1
            i = j
        if eos >= 0:
            line[count] = eos
            count += 1
        hashes[tokens] = eos_hash
        tokens += 1
        if word_ngrams > 1:
            for a in range(tokens):
                g64 = hashes[a]
                for b in range(a + 1, tokens if tokens < a + word_ngrams else a + word_ngrams):
                    g64 = g64 * _WORD_NGRAM_MULTIPLIER + hashes[b]
                    # (mypy reads the intrinsic's typing signature, with its context first.)
                    quotient: np.uint64 = _mul_high(g64, barrett)  # type: ignore[call-arg]
                    rest = g64 - quotient * buckets
                    while rest >= buckets:
                        rest -= buckets
                    row = _bucket_row(np.int64(rest), pruned, bucket_bits, bucket_ranks, nwords)
                    if row >= 0:
                        line[count] = row
                        count += 1
        _add_rows(rows, line, count, hidden)
        if count > 0:
            scale = np.float32(1.0 / count)
            for d in range(dim):
                hidden[d] *= scale


_LABEL_BYTES = np.frombuffer(_LABEL_PREFIX, np.uint8).copy()

# `</s>`'s hash as a word n-gram sees it (`_sign_extended`).
_EOS_HASH = np.uint64(fnv_hash(b"</s>") | (0xFFFFFFFF00000000 if fnv_hash(b"</s>") >= 1 << 31 else 0))


@dataclass
class Prediction:
    """Per text: the most probable label (index into `FastTextModel.labels`), its probability, and
    the probabilities of the labels asked for (columns in the order asked)."""

    top: np.ndarray
    top_prob: np.ndarray
    wanted_prob: np.ndarray


def hidden_vectors(
    model: FastTextModel, data: np.ndarray, offsets: np.ndarray, max_chars: int, sums: type = np.float32
) -> np.ndarray:
    """fastText's hidden vector of each text's first `max_chars` characters, [texts, dim], summed
    in `sums` (fastText's float32; float64 for projected rows, `fasttext_projected`); the texts
    are a UTF-8 buffer and offsets (`utf8_buffers`)."""
    ends = _sample_ends(data, offsets, max_chars)
    longest = int((ends - offsets[:-1]).max(initial=0))
    hiddens: np.ndarray = np.zeros((len(offsets) - 1, model.rows.shape[1]), sums)
    _hidden_kernel(
        data,
        offsets,
        max_chars,
        model.rows,
        model.word_bytes,
        model.word_offsets,
        model.word_slots,
        model.bucket_bits,
        model.bucket_ranks,
        model.pruned,
        model.nwords,
        model.eos,
        model.minn,
        model.maxn,
        model.bucket,
        model.word_ngrams,
        _EOS_HASH,
        ends,
        hiddens,
        # The bytes of "<token>", sign-extended as fastText hashes them, and its character starts.
        np.empty(longest + 2, np.uint64),
        np.empty(longest + 3, np.int64),
        # Tokens of up to _CACHED_BYTES bytes seen before in the batch, by hash: (offset in data,
        # length, first entry in cached_rows, rows); their rows, in the order they were added.
        np.full((_CACHE_SLOTS, 4), -1, np.int64),
        np.empty(_CACHE_ROWS, np.int32),
        # Every token's hash, and `</s>`'s (word n-grams).
        np.empty(longest + 2, np.uint64),
        # The rows of one text, in fastText's order: per token at most 1 + 3 * maxn per byte,
        # per token (or `</s>`) word_ngrams - 1 word n-grams and `</s>` itself.
        np.empty((1 + 3 * max(model.maxn, 0) + max(model.word_ngrams, 1)) * (longest + 2), np.int32),
    )
    return hiddens


def predict(
    model: FastTextModel,
    data: np.ndarray,
    offsets: np.ndarray,
    max_chars: int,
    wanted: tuple[str, ...] = (),
    exact: bool = True,
) -> Prediction:
    """The top label of each text's first `max_chars` characters, and `wanted` labels' probabilities
    (0 for a label the model does not have); texts as in `hidden_vectors`. `exact=False`: through
    the projected rows where they pay (`fasttext_projected`: fastText's numbers to its float32
    rounding, not bit for bit)."""
    view = model if exact else projected_model(model)
    sums = np.float32 if view is model else np.float64
    hiddens = hidden_vectors(view, data, offsets, max_chars, sums).astype(np.float32, copy=False)
    index = {label: i for i, label in enumerate(model.labels)}
    columns = np.array([index.get(label, -1) for label in wanted], np.int64)
    top, top_prob, wanted_prob = label_probabilities(hiddens, view, np.maximum(columns, 0))
    wanted_prob[:, columns < 0] = 0.0
    return Prediction(top, top_prob, wanted_prob)
