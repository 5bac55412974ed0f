"""An ARPA backoff model as flat arrays, for the compiled scorer (`dataclean.lm.ngram`).

The tables hold what KenLM's probing model holds (kenlm `lm/search_hashed`), read the way it reads
them, so that the scorer gives KenLM's scores bit for bit:

- `words`: the vocabulary, UTF-8, in the order of the 1-grams (`word_bytes` cut at
  `word_offsets`); a word's id is its position. `word_keys`/`word_slots`: an open-addressing
  table from the FNV-1a hash of a word's bytes to its id (for pieces looked up by their text);
- `unigrams[id]`: log10 probability and backoff, float32;
- `ngrams`: the n-grams of each order from 2 up in an open-addressing table of records (key,
  log10 probability, backoff) of their own, one after the other (order n's from
  `table_starts[n - 2]`, `table_masks[n - 2] + 1` slots), the key KenLM's hash of the word ids,
  newest word first (`lm/model.hh`: `CombineWordHash`), 0 where a slot is empty, at most 2/3
  full, as KenLM keeps one table per order;
- `specials`: the order and the ids of `<s>`, `</s>`, `<unk>`.

Numbers are parsed by Arrow's string-to-float32 cast, correctly rounded as KenLM's parser
(double-conversion's `StringToFloat`) is. `read_arpa` returns None, and the caller queries KenLM
itself, for a file this reader does not take exactly as KenLM does: a KenLM binary file, fields
not separated by tabs, a missing `<s>`, `</s>` or `<unk>` (KenLM adds one), an n-gram whose
context or suffix is not in the model (SRILM pruning: KenLM inserts blanks there), or two n-grams
of one order with the same 64-bit key (KenLM's probing table would confuse them as well).

Reading a 330,000-n-gram model takes about a second; `read_arpa` keeps the tables between
processes (`dataclean.lm.tablecache`).
"""

from __future__ import annotations

import gzip
import itertools
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.lm.tablecache import cache_path, load_arrays, save_arrays

# Part of a cached table's name: change it whenever the tables are laid out otherwise.
TABLES_FORMAT = 2
NGRAM = np.dtype([("key", np.uint64), ("prob", np.float32), ("backoff", np.float32)])
# KenLM's word-sequence hash (lm/model.hh): key = (key * A) ^ ((1 + next) * B), newest word first.
HASH_A = np.uint64(8978948897894561157)
HASH_B = np.uint64(17894857484156487943)
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)
ORDER, BOS, EOS, UNK = range(4)


@dataclass(frozen=True)
class NgramTables:
    """An ARPA model's vocabulary and n-grams (see the module docstring)."""

    word_bytes: np.ndarray
    word_offsets: np.ndarray
    word_keys: np.ndarray
    word_slots: np.ndarray
    unigrams: np.ndarray
    ngrams: np.ndarray
    table_starts: np.ndarray
    table_masks: np.ndarray
    specials: np.ndarray

    @property
    def order(self) -> int:
        return int(self.specials[ORDER])

    def words(self) -> list[str]:
        """The vocabulary, by id."""
        data = self.word_bytes.tobytes()
        bounds = self.word_offsets.tolist()
        return [data[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]


GZIP_MAGIC = b"\x1f\x8b"


class _Unsupported(Exception):
    """The file is one KenLM should read itself (see the module docstring)."""


def read_arpa(path: Path) -> NgramTables | None:
    """The tables of an ARPA file (`.arpa` or `.arpa.gz`), or None (see the module docstring);
    from the per-user cache when an earlier process built them."""
    if not path.name.endswith((".arpa", ".arpa.gz")):
        return None
    content = path.read_bytes()
    cached = cache_path(content, "arpa", TABLES_FORMAT)
    names = tuple(field.name for field in fields(NgramTables))
    arrays = load_arrays(cached, names) if cached is not None else None
    if arrays is not None:
        return NgramTables(**arrays)
    try:
        # By its bytes, not its name: a copy fetched through pyarrow's filesystems arrives
        # decompressed under the same `.gz` name (KenLM reads either alike).
        tables = _build(gzip.decompress(content) if content[:2] == GZIP_MAGIC else content)
    except (_Unsupported, UnicodeDecodeError, pa.ArrowInvalid):
        return None
    if cached is not None:
        save_arrays(cached, {name: getattr(tables, name) for name in names})
    return tables


def _sections(text: bytes) -> dict[int, pa.Array]:
    """{order: its n-gram lines} of an ARPA file, checked against the counts of its header."""
    head, _, body = text.partition(b"\\1-grams:")
    counts: dict[int, int] = {}
    for line in head.split(b"\n"):
        if line.startswith(b"ngram "):
            number, _, amount = line[6:].partition(b"=")
            counts[int(number)] = int(amount)
    if not counts or sorted(counts) != list(range(1, len(counts) + 1)):
        raise _Unsupported("no \\data\\ header")
    sections: dict[int, pa.Array] = {}
    rest = b"\\1-grams:" + body
    for n, count in counts.items():
        marker = b"\\%d-grams:" % n
        start = rest.find(marker)
        if start < 0:
            raise _Unsupported(f"no {marker!r} section")
        block, _, _ = rest[start + len(marker) :].partition(b"\n\\")
        lines = _lines(block)
        if len(lines) != count:
            raise _Unsupported(f"{len(lines)} {n}-grams, the header says {count}")
        sections[n] = lines
    return sections


def _lines(block: bytes) -> pa.Array:
    """The non-blank lines of `block` as a string array, cut without a Python object per line."""
    data = np.frombuffer(block + b"\n", np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    offsets = np.concatenate(([0], ends + 1)).astype(np.int32)
    lines = pa.Array.from_buffers(pa.string(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    lines.validate(full=True)  # UTF-8
    lines = pc.utf8_rtrim(lines, characters="\n\r")
    kept = pc.utf8_length(pc.utf8_trim_whitespace(lines)).to_numpy() > 0
    return lines if kept.all() else pc.filter(lines, pa.array(kept, pa.bool_()))


def _fields(lines: pa.Array, order: int, top: int) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(words column, log10 probabilities, backoffs) of one section's lines."""
    parts = pc.split_pattern(lines, "\t")
    lengths = pc.list_value_length(parts).to_numpy()
    if not np.all((lengths == 2) | ((lengths == 3) & (order < top))):
        raise _Unsupported("fields not separated by tabs")
    probs = pc.list_element(parts, 0).cast(pa.float32()).to_numpy()
    backoffs = np.zeros(len(lines), np.float32)  # KenLM reads a missing backoff as 0
    with_backoff = lengths == 3
    if with_backoff.any():
        chosen = pc.filter(parts, pa.array(with_backoff, pa.bool_()))
        backoffs[with_backoff] = pc.list_element(chosen, 2).cast(pa.float32()).to_numpy()
    return pc.list_element(parts, 1), probs, backoffs


def _keys(ids: np.ndarray) -> np.ndarray:
    """KenLM's hash of each row of word ids (oldest word first in the row)."""
    key = ids[:, -1].astype(np.uint64)
    with np.errstate(over="ignore"):
        for column in range(ids.shape[1] - 2, -1, -1):
            key = (key * HASH_A) ^ ((np.uint64(1) + ids[:, column].astype(np.uint64)) * HASH_B)
    return key


def word_hashes(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """FNV-1a of each word data[offsets[i]:offsets[i + 1]], with the lowest bit set (never 0)."""
    lengths = np.diff(offsets)
    hashes = np.full(len(lengths), FNV_OFFSET, np.uint64)
    with np.errstate(over="ignore"):
        for i in range(int(lengths.max(initial=0))):
            going = lengths > i
            byte = data[offsets[:-1][going] + i].astype(np.uint64)
            hashes[going] = (hashes[going] ^ byte) * FNV_PRIME
    hashes |= np.uint64(1)
    return hashes


def _all_in(keys: np.ndarray, sorted_keys: np.ndarray) -> bool:
    """Whether every key is in `sorted_keys`."""
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return bool(len(sorted_keys) and np.array_equal(sorted_keys[at], keys))


def _open_addressing(keys: np.ndarray, load: float) -> tuple[np.ndarray, np.ndarray]:
    """(slot keys, slot -> index into `keys` or -1) with linear probing from key & mask."""
    size = 1 << max(4, int(np.ceil(len(keys) / load)).bit_length())
    slot_keys = np.zeros(size, np.uint64)
    slot_index = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    pending = np.arange(len(keys))
    position = (keys & mask).astype(np.int64)
    placed_already = np.zeros(len(keys), np.bool_)
    while len(pending):  # each round places, per free slot, the first key that wants it
        wanting = pending[slot_index[position[pending]] < 0]
        _, first = np.unique(position[wanting], return_index=True)
        placed = wanting[first]
        slot_keys[position[placed]] = keys[placed]
        slot_index[position[placed]] = placed
        placed_already[placed] = True
        pending = pending[~placed_already[pending]]
        moved = pending[slot_index[position[pending]] >= 0]
        position[moved] = (position[moved] + 1) & (size - 1)
    return slot_keys, slot_index


def _build(text: bytes) -> NgramTables:
    sections = _sections(text)
    top = max(sections)
    words, probs, backoffs = _fields(sections[1], 1, top)
    vocabulary = words.cast(pa.string())
    if len(pc.unique(vocabulary)) != len(vocabulary):
        raise _Unsupported("a word is listed twice")
    index = {word: vocabulary.index(word).as_py() for word in ("<s>", "</s>", "<unk>")}
    if min(index.values()) < 0:
        raise _Unsupported("no <s>, </s> or <unk>")
    word_data = vocabulary.cast(pa.large_binary())
    offsets = np.frombuffer(word_data.buffers()[1], np.int64)[: len(word_data) + 1].copy()
    data = np.frombuffer(word_data.buffers()[2], np.uint8).copy()
    hashes = word_hashes(data, offsets)
    word_keys, word_slots = _open_addressing(hashes, 0.5)
    tables = []
    previous = np.zeros(0, np.uint64)
    for order in range(2, top + 1):
        ngram_words, ngram_probs, ngram_backoffs = _fields(sections[order], order, top)
        split = pc.split_pattern(ngram_words, " ")
        if not np.all(pc.list_value_length(split).to_numpy() == order):
            raise _Unsupported(f"a {order}-gram without {order} words")
        ids = pc.index_in(pc.list_flatten(split), value_set=vocabulary)
        if ids.null_count:
            raise _Unsupported(f"a {order}-gram with a word not among the 1-grams")
        matrix = ids.to_numpy().astype(np.int64).reshape(-1, order)
        keys = _keys(matrix)
        if order > 2:  # context and suffix of every n-gram in the model (no blanks)
            if not _all_in(_keys(matrix[:, :-1]), previous):
                raise _Unsupported(f"a {order}-gram whose context is not in the model")
            if not _all_in(_keys(matrix[:, 1:]), previous):
                raise _Unsupported(f"a {order}-gram whose suffix is not in the model")
        previous = np.sort(keys)
        if (np.diff(previous) == 0).any() or previous[0] == 0:
            raise _Unsupported(f"two {order}-grams share a 64-bit key")
        slot_keys, slot_index = _open_addressing(keys, 2 / 3)
        table = np.zeros(len(slot_keys), NGRAM)
        used = slot_index >= 0
        table["key"][used] = slot_keys[used]
        table["prob"][used] = ngram_probs[slot_index[used]]
        table["backoff"][used] = ngram_backoffs[slot_index[used]]
        tables.append(table)
    sizes = [len(table) for table in tables]
    return NgramTables(
        word_bytes=data,
        word_offsets=offsets,
        word_keys=word_keys,
        word_slots=word_slots,
        unigrams=np.stack([probs, backoffs], axis=1).astype(np.float32),
        ngrams=np.concatenate(tables) if tables else np.zeros(1, NGRAM),
        table_starts=np.array(np.cumsum([0, *sizes])[:-1], np.uint64).reshape(-1),
        table_masks=np.array([size - 1 for size in sizes], np.uint64),
        specials=np.array([top, index["<s>"], index["</s>"], index["<unk>"]], np.int64),
    )
