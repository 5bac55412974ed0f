"""fastText supervised-model inference as a numba kernel over an Arrow batch (lid.176 and its kin).

`read_model` reads a fastText model file (`.ftz`, quantized, or `.bin`) into numpy arrays;
`predict` gives, for every text of a string array, the probability of every label, from the
text's first `max_chars` characters. It computes what fastText's own `predict` computes on the
same characters as one line (fastText C++ 0.9, `Dictionary::getLine` and `Model::predict`):

- tokens are runs of bytes between ASCII whitespace (space, tab, newline, CR, VT, FF, NUL); a
  newline inside the text is a space, as CCNet and datatrove feed fastText; `</s>` ends the line;
  tokens starting with `__label__` are labels and ignored;
- a token in the vocabulary contributes its own row, then its character n-grams'; any other token
  its character n-grams' only: the n-grams of `<token>` of `minn` to `maxn` characters, each
  hashed with 32-bit FNV-1a over its bytes (sign-extended, as fastText does) modulo `bucket`; in a
  pruned (quantized) model only the buckets that survived pruning count;
- the hidden vector is the mean of those rows, summed in float32 in fastText's order (a quantized
  row is its norm times its product-quantizer centroids, multiplied as fastText does);
- hierarchical softmax (`-loss hs`, lid.176's): a label's probability is the product of the
  sigmoids along its path in the Huffman tree of the label counts, each step's log taken as
  fastText does (`log(x + 1e-5)`); `-loss softmax` models: a softmax over the output rows.

Why not fastText's own binding: `fasttext-predict` (the inference-only build) labels about 7 MB/s
per core on the first 2,000 characters of web documents, a per-call and per-n-gram cost (a string
per n-gram, a hash map per lookup); this loop walks the Arrow buffer once, with no object per
token. The tests compare its labels and probabilities with fasttext-predict's on real text.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np
import pyarrow as pa

from dataclean.errors import ConfigError

_MAGIC = 793712314
_LOSS_HS, _LOSS_SOFTMAX = 1, 3
_LABEL_PREFIX = b"__label__"
_FNV_OFFSET = np.uint32(2166136261)
_FNV_PRIME = np.uint32(16777619)


@dataclass
class FastTextModel:
    """A supervised fastText model as flat arrays (see the module docstring for their use)."""

    labels: list[str]
    rows: np.ndarray  # float32 [input rows, dim]: word rows, then the kept n-gram buckets' rows
    output: np.ndarray  # float32 [labels or tree nodes, dim]
    word_bytes: np.ndarray  # uint8: vocabulary words, concatenated
    word_offsets: np.ndarray  # int64 [words + 1]
    word_slots: np.ndarray  # int32 open-addressing table of word ids by FNV hash, -1 empty
    bucket_keys: np.ndarray  # int32 open-addressing table of kept buckets, -1 empty
    bucket_rows: np.ndarray  # int32 the row of each kept bucket
    pruned: bool  # False: every bucket b is row nwords + b
    nwords: int
    eos: int  # the row of `</s>`, -1 when it is not in the vocabulary
    minn: int
    maxn: int
    bucket: int
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


def _fnv(word: bytes) -> int:
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


def _table_size(entries: int) -> int:
    return 1 << max(4, int(entries * 3).bit_length())


def read_model(path: str | Path) -> FastTextModel:
    """Read a supervised fastText model file (format version 12, as fastText 0.9 writes)."""
    path = Path(path)
    reader = _Reader(path.read_bytes(), path)
    magic, version = reader.unpack("<ii")
    if magic != _MAGIC or version != 12:
        raise ConfigError(f"{path}: not a fastText model file (format 12)")
    args = reader.unpack("<12id")
    loss, model_kind, bucket, minn, maxn = (int(args[i]) for i in (6, 7, 8, 9, 10))
    if model_kind != 3 or loss not in (_LOSS_HS, _LOSS_SOFTMAX):
        raise ConfigError(f"{path}: a supervised fastText model with hs or softmax loss is needed")
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
    word_slots = np.full(_table_size(nwords), -1, np.int32)
    mask = len(word_slots) - 1
    for index, word in enumerate(vocabulary):
        slot = _fnv(word) & mask
        while word_slots[slot] >= 0:
            slot = (slot + 1) & mask
        word_slots[slot] = index
    bucket_keys = np.full(_table_size(len(pruned_pairs)), -1, np.int32)
    bucket_rows = np.zeros(len(bucket_keys), np.int32)
    mask = len(bucket_keys) - 1
    for key, value in pruned_pairs:
        slot = (int(key) * 2654435761 >> 7) & mask
        while bucket_keys[slot] >= 0:
            slot = (slot + 1) & mask
        bucket_keys[slot], bucket_rows[slot] = key, nwords + value
    left, right, parent = _huffman(counts[nwords:]) if loss == _LOSS_HS else (np.zeros(0, np.int32),) * 3
    return FastTextModel(
        labels=[w.decode("utf-8").removeprefix("__label__") for w in words[nwords:]],
        rows=np.ascontiguousarray(rows),
        output=np.ascontiguousarray(output),
        word_bytes=np.frombuffer(b"".join(vocabulary), np.uint8),
        word_offsets=word_offsets,
        word_slots=word_slots,
        bucket_keys=bucket_keys,
        bucket_rows=bucket_rows,
        pruned=prune_size >= 0,
        nwords=nwords,
        eos=vocabulary.index(b"</s>") if b"</s>" in vocabulary else -1,
        minn=minn,
        maxn=maxn,
        bucket=bucket,
        loss=loss,
        tree_left=left,
        tree_right=right,
        tree_parent=parent,
    )


@nb.njit(inline="always")
def _fnv_byte(h: np.uint32, byte: np.uint8) -> np.uint32:
    # numba widens uint32 arithmetic to 64 bits: truncate back, as the C++ uint32_t product wraps.
    signed = np.uint64(byte) | np.uint64(0xFFFFFF00) if byte >= 0x80 else np.uint64(byte)
    return np.uint32((np.uint64(h) ^ signed) * np.uint64(16777619) & np.uint64(0xFFFFFFFF))


@nb.njit(inline="always")
def _is_space(byte: np.uint8) -> bool:
    return byte == 32 or byte == 10 or byte == 13 or byte == 9 or byte == 11 or byte == 12 or byte == 0


@nb.njit(cache=True)
def _hidden_kernel(
    data: np.ndarray,
    offsets: np.ndarray,
    max_chars: int,
    rows: np.ndarray,
    word_bytes: np.ndarray,
    word_offsets: np.ndarray,
    word_slots: np.ndarray,
    bucket_keys: np.ndarray,
    bucket_rows: np.ndarray,
    pruned: bool,
    nwords: int,
    eos: int,
    minn: int,
    maxn: int,
    bucket: int,
) -> np.ndarray:
    """The hidden vector (float32 [texts, dim]) of each text's first `max_chars` characters."""
    n = len(offsets) - 1
    dim = rows.shape[1]
    hiddens = np.zeros((n, dim), np.float32)
    char_starts = np.zeros(max_chars + 3, np.int64)
    word_mask = len(word_slots) - 1
    bucket_mask = len(bucket_keys) - 1
    bow = np.uint8(60)  # "<"
    eow = np.uint8(62)  # ">"
    for t in range(n):
        start, stop = offsets[t], offsets[t + 1]
        # The sample: the first max_chars characters.
        end, chars = start, 0
        while end < stop:
            if (data[end] & 0xC0) != 0x80:
                if chars == max_chars:
                    break
                chars += 1
            end += 1
        hidden = hiddens[t]
        count = 0
        i = start
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
            is_label = False
            if length >= 9:
                is_label = True
                for k in range(9):
                    if data[i + k] != _LABEL_BYTES[k]:
                        is_label = False
                        break
            if is_label:
                i = j
                continue
            # Vocabulary lookup.
            slot = h & word_mask
            wid = -1
            while word_slots[slot] >= 0:
                cand = word_slots[slot]
                a, b = word_offsets[cand], word_offsets[cand + 1]
                if b - a == length:
                    same = True
                    for k in range(length):
                        if word_bytes[a + k] != data[i + k]:
                            same = False
                            break
                    if same:
                        wid = cand
                        break
                slot = (slot + 1) & word_mask
            if wid >= 0:
                for d in range(dim):
                    hidden[d] += rows[wid, d]
                count += 1
            # Character starts of "<token>": "<" at 0, the token's characters, ">" last.
            char_starts[0] = -1
            nch = 1
            for k in range(i, j):
                if (data[k] & 0xC0) != 0x80:
                    char_starts[nch] = k
                    nch += 1
            char_starts[nch] = j  # ">"
            nch += 1
            for c in range(nch):
                g = _FNV_OFFSET
                for m in range(maxn):
                    if c + m >= nch:
                        break
                    pos = char_starts[c + m]
                    if pos == -1:
                        g = _fnv_byte(g, bow)
                    elif pos == j:
                        g = _fnv_byte(g, eow)
                    else:
                        q = pos + 1
                        while q < j and (data[q] & 0xC0) == 0x80:
                            q += 1
                        for r in range(pos, q):
                            g = _fnv_byte(g, data[r])
                    size = m + 1
                    if size < minn or (size == 1 and (c == 0 or c + m == nch - 1)):
                        continue
                    key = np.int64(g) % bucket
                    row = -1
                    if pruned:
                        s = ((key * 2654435761) >> 7) & bucket_mask
                        while bucket_keys[s] >= 0:
                            if bucket_keys[s] == key:
                                row = bucket_rows[s]
                                break
                            s = (s + 1) & bucket_mask
                    else:
                        row = nwords + key
                    if row >= 0:
                        for d in range(dim):
                            hidden[d] += rows[row, d]
                        count += 1
            i = j
        if eos >= 0:
            for d in range(dim):
                hidden[d] += rows[eos, d]
            count += 1
        if count > 0:
            scale = np.float32(1.0 / count)
            for d in range(dim):
                hidden[d] *= scale
    return hiddens


@nb.njit(inline="always")
def _sigmoid_logs(output: np.ndarray, row: int, hidden: np.ndarray) -> tuple[np.float32, np.float32]:
    """fastText's log(1 - f + 1e-5) and log(f + 1e-5) for f = sigmoid(output[row] . hidden)."""
    f = np.float32(0.0)
    for d in range(hidden.shape[0]):
        f += output[row, d] * hidden[d]
    f = np.float32(1.0 / (np.float32(1.0) + np.exp(-f)))
    left = np.float32(np.log(np.float64(np.float32(1.0 - np.float64(f))) + 1e-5))
    right = np.float32(np.log(np.float64(f) + 1e-5))
    return left, right


@nb.njit(cache=True)
def _tree_kernel(
    hiddens: np.ndarray,
    output: np.ndarray,
    tree_left: np.ndarray,
    tree_right: np.ndarray,
    tree_parent: np.ndarray,
    wanted: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hierarchical softmax: the top label and its probability (fastText's depth-first search with
    k=1, pruned below the best leaf so far), and the probability of each `wanted` label."""
    n = hiddens.shape[0]
    osz = (len(tree_left) + 1) // 2
    root = 2 * osz - 2
    top = np.zeros(n, np.int32)
    top_prob = np.zeros(n, np.float32)
    wanted_prob = np.zeros((n, len(wanted)), np.float32)
    stack_node = np.zeros(2 * osz, np.int64)
    stack_score = np.zeros(2 * osz, np.float32)
    path = np.zeros(2 * osz, np.int64)
    for t in range(n):
        hidden = hiddens[t]
        best, best_score = -1, np.float32(-np.inf)
        depth = 0
        stack_node[0], stack_score[0] = root, np.float32(0.0)
        depth = 1
        while depth > 0:
            depth -= 1
            node, score = stack_node[depth], stack_score[depth]
            if best >= 0 and score < best_score:
                continue
            if tree_left[node] == -1:
                if best < 0 or score > best_score:
                    best, best_score = node, score
                continue
            left, right = _sigmoid_logs(output, node - osz, hidden)
            # Right is pushed first so that the left subtree is searched first, as fastText does.
            stack_node[depth], stack_score[depth] = tree_right[node], score + right
            stack_node[depth + 1], stack_score[depth + 1] = tree_left[node], score + left
            depth += 2
        top[t], top_prob[t] = best, np.exp(best_score)
        for w in range(len(wanted)):
            steps = 0
            node = wanted[w]
            while tree_parent[node] >= 0:
                path[steps] = node
                steps += 1
                node = tree_parent[node]
            score = np.float32(0.0)
            for s in range(steps - 1, -1, -1):
                child = path[s]
                parent = tree_parent[child]
                left, right = _sigmoid_logs(output, parent - osz, hidden)
                score = score + (right if tree_right[parent] == child else left)
            wanted_prob[t, w] = np.exp(score)
    return top, top_prob, wanted_prob


@nb.njit(cache=True)
def _softmax_kernel(hiddens: np.ndarray, output: np.ndarray) -> np.ndarray:
    """Softmax over the output rows: probabilities [texts, labels]."""
    n, nlabels = hiddens.shape[0], output.shape[0]
    probs = np.zeros((n, nlabels), np.float32)
    for t in range(n):
        best = np.float32(-np.inf)
        for label in range(nlabels):
            f = np.float32(0.0)
            for d in range(hiddens.shape[1]):
                f += output[label, d] * hiddens[t, d]
            probs[t, label] = f
            best = max(best, f)
        total = np.float32(0.0)
        for label in range(nlabels):
            probs[t, label] = np.exp(probs[t, label] - best)
            total += probs[t, label]
        for label in range(nlabels):
            probs[t, label] /= total
    return probs


_LABEL_BYTES = np.frombuffer(_LABEL_PREFIX, np.uint8).copy()


def utf8_buffers(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 data buffer and int64 offsets of a string array (nulls as empty strings)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = texts.cast(pa.large_string()).fill_null("")
    buffers = texts.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[texts.offset : texts.offset + len(texts) + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(1, np.uint8)
    return data, offsets


@dataclass
class Prediction:
    """Per text: the most probable label (index into `FastTextModel.labels`), its probability, and
    the probabilities of the labels asked for (columns in the order asked)."""

    top: np.ndarray
    top_prob: np.ndarray
    wanted_prob: np.ndarray


def hidden_vectors(model: FastTextModel, data: np.ndarray, offsets: np.ndarray, max_chars: int) -> np.ndarray:
    """fastText's hidden vector of each text's first `max_chars` characters, float32 [texts, dim];
    the texts are a UTF-8 buffer and offsets (`utf8_buffers`)."""
    return _hidden_kernel(
        data,
        offsets,
        max_chars,
        model.rows,
        model.word_bytes,
        model.word_offsets,
        model.word_slots,
        model.bucket_keys,
        model.bucket_rows,
        model.pruned,
        model.nwords,
        model.eos,
        model.minn,
        model.maxn,
        model.bucket,
    )


def predict(
    model: FastTextModel, data: np.ndarray, offsets: np.ndarray, max_chars: int, wanted: tuple[str, ...] = ()
) -> Prediction:
    """The top label of each text's first `max_chars` characters, and `wanted` labels' probabilities
    (0 for a label the model does not have); texts as in `hidden_vectors`."""
    hiddens = hidden_vectors(model, data, offsets, max_chars)
    index = {label: i for i, label in enumerate(model.labels)}
    columns = np.array([index.get(label, -1) for label in wanted], np.int64)
    if model.loss == _LOSS_HS:
        tree = (model.tree_left, model.tree_right, model.tree_parent)
        top, top_prob, wanted_prob = _tree_kernel(hiddens, model.output, *tree, np.maximum(columns, 0))
    else:
        probs = _softmax_kernel(hiddens, model.output)
        top = probs.argmax(axis=1).astype(np.int32)
        top_prob = probs[np.arange(len(top)), top]
        wanted_prob = probs[:, np.maximum(columns, 0)]
    wanted_prob[:, columns < 0] = 0.0
    return Prediction(top, top_prob, wanted_prob)
