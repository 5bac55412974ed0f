"""Reading a fastText model file into the flat arrays `dataclean.lang.fasttext` computes with.

The format is fastText 0.9's (version 12): the training arguments, the dictionary (words, then
labels, with counts; the kept n-gram buckets of a pruned model), the input matrix (dense, or
product-quantized with norms as `-quantize` writes it) and the output matrix. A quantized row is
expanded once, at load, to its norm times its centroids in float32, as fastText's `addcode`
multiplies them, so the sums the kernel makes are fastText's own.

A pruned model keeps a few of its n-gram buckets (lid.176: 42,765 of 2,000,000). Their rows are
stored here in bucket order, so that a bucket's row is found from a bitmap of the kept buckets
(256 KB for 2 M buckets) and a count of the kept buckets before each 64-bit word of it: two reads
that stay in the CPU's cache, where a hash table lookup per n-gram missed it. The rows are the
same vectors, only their order in the matrix changes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dataclean.errors import ConfigError

_MAGIC = 793712314
# fastText's `loss_name`: hierarchical softmax, negative sampling, softmax, one-vs-all.
LOSS_HS, LOSS_NS, LOSS_SOFTMAX, LOSS_OVA = 1, 2, 3, 4


@dataclass
class FastTextModel:
    """A supervised fastText model as flat arrays (see the module docstring for their use)."""

    labels: list[str]
    rows: np.ndarray  # float32 [input rows, dim]: word rows, then the kept n-gram buckets' rows
    output: np.ndarray  # float32 [labels or tree nodes, dim]
    word_bytes: np.ndarray  # uint8: vocabulary words, concatenated
    word_offsets: np.ndarray  # int64 [words + 1]
    # int64 [slots, 2], open addressing by FNV hash: (id | length << 32, the word's first 8 bytes
    # as a little-endian int64, zero-padded); -1 marks an empty slot
    word_slots: np.ndarray
    bucket_bits: np.ndarray  # uint64 bitmap of the kept buckets (bit b % 64 of word b // 64)
    bucket_ranks: np.ndarray  # int32 per bitmap word: the row of its first kept bucket
    pruned: bool  # False: every bucket b is row nwords + b
    nwords: int
    eos: int  # the row of `</s>`, -1 when it is not in the vocabulary
    minn: int
    maxn: int
    bucket: int
    word_ngrams: int  # -wordNgrams: tokens per word n-gram, at most (1: words only)
    loss: int
    tree_left: np.ndarray  # int32 per tree node (hierarchical softmax), -1 for leaves
    tree_right: np.ndarray
    tree_parent: np.ndarray  # int32, -1 for the root


class _Reader:
    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.offset, self.path = data, 0, path

    def unpack(self, fmt: str) -> tuple[int | float | bool, ...]:
        values = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += struct.calcsize(fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.offset)
        self.offset += values.nbytes
        return values

    def word(self) -> bytes:
        end = self.data.index(b"\0", self.offset)
        word = self.data[self.offset : end]
        self.offset = end + 1
        return word


def fnv_hash(word: bytes) -> int:
    """fastText's `Dictionary::hash`: 32-bit FNV-1a over the bytes, each sign-extended."""
    h = 2166136261
    for byte in word:
        h = ((h ^ (byte | 0xFFFFFF00 if byte >= 0x80 else byte)) * 16777619) & 0xFFFFFFFF
    return h


def _quantized_rows(reader: _Reader) -> np.ndarray:
    """Dense rows of a QuantMatrix: norm x centroids, in float32 as fastText's `addcode` multiplies."""
    qnorm, m, _n, codesize = (int(v) for v in reader.unpack("<?qqi"))
    codes = reader.array("u1", codesize)
    dim, nsubq, dsub, lastdsub = (int(v) for v in reader.unpack("<4i"))
    centroids = reader.array("<f4", dim * 256)
    if qnorm:
        norm_codes = reader.array("u1", m)
        reader.unpack("<4i")  # the norm quantizer: dim 1, one subquantizer
        norms = reader.array("<f4", 256)[norm_codes]
    else:
        norms = np.ones(m, np.float32)
    codes = codes.reshape(m, nsubq)
    rows = np.empty((m, dim), np.float32)
    for sub in range(nsubq):
        width = lastdsub if sub == nsubq - 1 else dsub
        table = centroids[sub * 256 * dsub : sub * 256 * dsub + 256 * width].reshape(256, width)
        rows[:, sub * dsub : sub * dsub + width] = norms[:, None] * table[codes[:, sub]]
    return rows


def _dense_rows(reader: _Reader) -> np.ndarray:
    m, n = (int(v) for v in reader.unpack("<qq"))
    return reader.array("<f4", m * n).reshape(m, n).astype(np.float32)


def _huffman(counts: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """fastText's `HierarchicalSoftmaxLoss::buildTree` over label counts (sorted, largest first)."""
    osz = len(counts)
    count = [*counts, *([10**15] * (osz - 1))]
    left = np.full(2 * osz - 1, -1, np.int32)
    right = np.full(2 * osz - 1, -1, np.int32)
    parent = np.full(2 * osz - 1, -1, np.int32)
    leaf, node = osz - 1, osz
    for i in range(osz, 2 * osz - 1):
        mini = [0, 0]
        for j in range(2):
            if leaf >= 0 and count[leaf] < count[node]:
                mini[j], leaf = leaf, leaf - 1
            else:
                mini[j], node = node, node + 1
        left[i], right[i] = mini
        parent[mini[0]] = parent[mini[1]] = i
        count[i] = count[mini[0]] + count[mini[1]]
    return left, right, parent


def _word_slots(vocabulary: list[bytes]) -> np.ndarray:
    """The vocabulary's lookup table (`FastTextModel.word_slots`): a slot holds a word's id and
    length and its first 8 bytes, so that a word of up to 8 bytes (most words) is found with one
    read, not three (the slot, the word's offsets, its bytes: each a cache miss in a large
    vocabulary). At most half the slots are used."""
    slots = np.zeros((1 << max(4, (len(vocabulary) * 2).bit_length()), 2), np.int64)
    slots[:, 0] = -1
    mask = len(slots) - 1
    for index, word in enumerate(vocabulary):
        slot = fnv_hash(word) & mask
        while slots[slot, 0] >= 0:
            slot = (slot + 1) & mask
        slots[slot, 0] = index | (len(word) << 32)
        prefix = int.from_bytes(word[:8], "little")
        slots[slot, 1] = prefix - (1 << 64) if prefix >= 1 << 63 else prefix
    return slots


def _bucket_index(
    pruned_pairs: np.ndarray, rows: np.ndarray, nwords: int, bucket: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bitmap of the kept buckets, row of the first kept bucket of each bitmap word, the rows
    with the kept buckets' rows in bucket order) from a pruned model's (bucket, row - nwords)
    pairs (no bit set when the model keeps none, or is not pruned)."""
    bits = np.zeros(bucket // 64 + 1, np.uint64)
    if len(pruned_pairs) == 0:
        return bits, np.full(len(bits), nwords, np.int32), rows
    keys = pruned_pairs[:, 0].astype(np.int64)
    if keys.min() < 0 or keys.max() >= bucket or len(np.unique(keys)) != len(keys):
        raise ConfigError("fastText model: its pruned n-gram buckets are not distinct buckets")
    order = np.argsort(keys)
    keys = keys[order]
    np.bitwise_or.at(bits, keys >> 6, np.left_shift(np.uint64(1), (keys & 63).astype(np.uint64)))
    kept_before = np.searchsorted(keys, np.arange(len(bits), dtype=np.int64) * 64)
    ranks = (nwords + kept_before).astype(np.int32)
    reordered = np.concatenate([rows[:nwords], rows[nwords + pruned_pairs[order, 1].astype(np.int64)]])
    return bits, ranks, reordered


def read_model(path: str | Path) -> FastTextModel:
    """Read a supervised fastText model file (format version 12, as fastText 0.9 writes)."""
    path = Path(path)
    reader = _Reader(path.read_bytes(), path)
    magic, version = reader.unpack("<ii")
    if magic != _MAGIC or version != 12:
        raise ConfigError(f"{path}: not a fastText model file (format 12)")
    args = reader.unpack("<12id")
    word_ngrams, loss, model_kind, bucket, minn, maxn = (int(args[i]) for i in (5, 6, 7, 8, 9, 10))
    if model_kind != 3:
        raise ConfigError(f"{path}: not a supervised fastText model (word vectors cannot classify)")
    if loss not in (LOSS_HS, LOSS_NS, LOSS_SOFTMAX, LOSS_OVA):
        raise ConfigError(f"{path}: unknown fastText loss {loss}")
    size, nwords, _labels = (int(v) for v in reader.unpack("<iii"))
    _tokens, prune_size = (int(v) for v in reader.unpack("<qq"))
    words: list[bytes] = []
    counts: list[int] = []
    for _ in range(size):
        word = reader.word()
        count, _kind = reader.unpack("<qb")
        words.append(word)
        counts.append(int(count))
    pruned_pairs = reader.array("<i4", 2 * max(prune_size, 0)).reshape(-1, 2)
    (quant_input,) = reader.unpack("<?")
    rows = _quantized_rows(reader) if quant_input else _dense_rows(reader)
    (quant_output,) = reader.unpack("<?")
    if quant_output:
        raise ConfigError(f"{path}: quantized output layers (-qout) are not supported")
    output = _dense_rows(reader)

    vocabulary = words[:nwords]
    word_offsets = np.zeros(nwords + 1, np.int64)
    word_offsets[1:] = np.cumsum([len(w) for w in vocabulary])
    word_slots = _word_slots(vocabulary)
    bucket_bits, bucket_ranks, rows = _bucket_index(pruned_pairs, rows, nwords, bucket)
    left, right, parent = _huffman(counts[nwords:]) if loss == LOSS_HS else (np.zeros(0, np.int32),) * 3
    return FastTextModel(
        labels=[w.decode("utf-8").removeprefix("__label__") for w in words[nwords:]],
        rows=np.ascontiguousarray(rows),
        output=np.ascontiguousarray(output),
        word_bytes=np.frombuffer(b"".join(vocabulary), np.uint8),
        word_offsets=word_offsets,
        word_slots=word_slots,
        bucket_bits=bucket_bits,
        bucket_ranks=bucket_ranks,
        pruned=prune_size >= 0,
        nwords=nwords,
        eos=vocabulary.index(b"</s>") if b"</s>" in vocabulary else -1,
        minn=minn,
        maxn=maxn,
        bucket=bucket,
        word_ngrams=word_ngrams,
        loss=loss,
        tree_left=left,
        tree_right=right,
        tree_parent=parent,
    )
