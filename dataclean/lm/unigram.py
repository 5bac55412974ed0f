"""A SentencePiece unigram model as flat arrays, for the compiled tokenizer (`dataclean.lm.compiled`).

SentencePiece segments a normalized line by Viterbi search over its vocabulary: the best-scoring
sequence of pieces, where a piece scores its log probability and a character no single-character
piece covers scores the lowest piece score minus 10 (an unknown). We read the pieces and scores
through sentencepiece's own API and lay them out as a trie over code points:

- `char_ids[code]`: a dense id (1..K) of each character that occurs in some piece, 0 otherwise;
- `root_children[char_id]`: the trie node one character from the root, -1 if none;
- `edge_keys` / `edge_nodes`: every deeper edge (parent node * (K + 1) + char id -> child node) in
  an open-addressing hash table with linear probing, `edge_keys` -1 where a slot is empty;
- `node_pieces[node]`: the vocabulary id of the piece that ends at a node, -1 if none;
- `scores[piece]`: its score, float32 as SentencePiece keeps it, so sums round the same way.

Only models trained the way `dataclean.lm.tokenizer` trains them are read (unigram, no byte
fallback, no user-defined pieces, SentencePiece normalization off, "▁" a piece of its own):
`read_unigram` returns None for any other, and the caller uses SentencePiece itself. The settings
are read from the serialized model (a few protobuf fields, read here so that no protobuf package
is needed).

Building the tables walks every piece in Python (0.2-0.4 s a model, in every process that scores
text, at every run): `read_unigram` keeps them between processes (`dataclean.lm.tablecache`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import sentencepiece as spm

from dataclean.jit import helper
from dataclean.lm.tablecache import cache_path, load_arrays, save_arrays

# Field numbers of sentencepiece_model.proto (ModelProto, TrainerSpec, NormalizerSpec, pieces).
_PIECES, _TRAINER_SPEC, _NORMALIZER_SPEC, _TYPE = 1, 2, 3, 3
_NORMAL, _UNKNOWN, _USER_DEFINED, _BYTE = 1, 2, 4, 6  # piece types
_MODEL_TYPE, _TREAT_WHITESPACE_AS_SUFFIX, _BYTE_FALLBACK = 3, 24, 35
_PRECOMPILED_CHARSMAP, _ADD_DUMMY_PREFIX, _REMOVE_EXTRA_WHITESPACES, _ESCAPE_WHITESPACES = 2, 3, 4, 5
_UNIGRAM = 1
# What `dataclean.lm.tokenizer` trains, with each field's proto default where it is not written.
_REQUIRED = {
    (_TRAINER_SPEC, _MODEL_TYPE): (_UNIGRAM, _UNIGRAM),
    (_TRAINER_SPEC, _TREAT_WHITESPACE_AS_SUFFIX): (0, 0),
    (_TRAINER_SPEC, _BYTE_FALLBACK): (0, 0),
    (_NORMALIZER_SPEC, _PRECOMPILED_CHARSMAP): (b"", b""),
    (_NORMALIZER_SPEC, _ADD_DUMMY_PREFIX): (1, 0),
    (_NORMALIZER_SPEC, _REMOVE_EXTRA_WHITESPACES): (1, 0),
    (_NORMALIZER_SPEC, _ESCAPE_WHITESPACES): (1, 1),
}
WORD_START = "▁"  # SentencePiece's whitespace symbol
# SentencePiece gives a character no piece covers this much less than the lowest piece score.
UNKNOWN_PENALTY = 10.0
# Part of a cached table's name: change it whenever `_build_tables` lays the tables out otherwise.
TABLES_FORMAT = 1


@dataclass(frozen=True)
class UnigramTables:
    """The trie and scores of a unigram model (see the module docstring)."""

    char_ids: np.ndarray
    root_children: np.ndarray
    edge_keys: np.ndarray
    edge_nodes: np.ndarray
    node_pieces: np.ndarray
    scores: np.ndarray
    unknown_score: np.float32


def _varint(buffer: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buffer[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, position


def _each_field(buffer: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a serialized protobuf message's varint and bytes fields, in order."""
    position = 0
    while position < len(buffer):
        key, position = _varint(buffer, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(buffer, position)
            yield number, value
        elif wire_type == 2:
            size, position = _varint(buffer, position)
            yield number, buffer[position : position + size]
            position += size
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")


def is_supported(model_proto: bytes) -> bool:
    """Whether the model is one the compiled segmenter reproduces (see the module docstring)."""
    top = dict(_each_field(model_proto))
    specs = {n: dict(_each_field(bytes(top.get(n, b"")))) for n in (_TRAINER_SPEC, _NORMALIZER_SPEC)}
    settings = all(
        specs[spec].get(field, default) == wanted for (spec, field), (default, wanted) in _REQUIRED.items()
    )
    types = [
        dict(_each_field(bytes(piece))).get(_TYPE, _NORMAL)
        for number, piece in _each_field(model_proto)
        if number == _PIECES
    ]
    return settings and types.count(_UNKNOWN) == 1 and not set(types) & {_USER_DEFINED, _BYTE}


def read_unigram(model_proto: bytes) -> UnigramTables | None:
    """The trie arrays of a supported unigram model, or None (see the module docstring); from the
    per-user cache when an earlier process built them."""
    path = _cache_path(model_proto)
    cached = _load_cached(path) if path is not None else None
    if cached is not None:
        return cached
    if not is_supported(model_proto):
        return None
    tables = _build_tables(model_proto)
    if tables is not None and path is not None:
        _save_cached(path, tables)
    return tables


def _cache_path(model_proto: bytes) -> Path | None:
    """Where the tables of this model are cached, or None without a kernel cache folder."""
    return cache_path(model_proto, "unigram", TABLES_FORMAT)


def _load_cached(path: Path) -> UnigramTables | None:
    values = load_arrays(path, tuple(field.name for field in fields(UnigramTables)))
    if values is None:
        return None
    unknown = np.float32(values.pop("unknown_score"))
    return UnigramTables(**values, unknown_score=unknown)


def _save_cached(path: Path, tables: UnigramTables) -> None:
    save_arrays(path, {field.name: getattr(tables, field.name) for field in fields(UnigramTables)})


def _build_tables(model_proto: bytes) -> UnigramTables | None:
    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    size = processor.get_piece_size()
    special = [processor.is_unknown(i) or processor.is_control(i) for i in range(size)]
    scores = np.array([processor.get_score(i) for i in range(size)], np.float32)
    pieces = {
        processor.id_to_piece(i): i for i in range(size) if not special[i] and not processor.is_unused(i)
    }
    if WORD_START not in pieces:
        return None  # words are searched one by one only if "▁" alone is a piece (compiled.py)
    chars = sorted({c for piece in pieces for c in piece})
    char_ids = np.zeros(ord(chars[-1]) + 1, np.int32)
    char_ids[[ord(c) for c in chars]] = np.arange(1, len(chars) + 1)
    width = len(chars) + 1
    children: dict[tuple[int, int], int] = {}
    node_pieces = [-1]
    for piece, piece_id in pieces.items():
        node = 0
        for c in piece:
            edge = (node, int(char_ids[ord(c)]))
            if edge not in children:
                children[edge] = len(node_pieces)
                node_pieces.append(-1)
            node = children[edge]
        node_pieces[node] = piece_id
    root_children = np.full(width, -1, np.int32)
    deep: dict[int, int] = {}
    for (parent, char_id), child in children.items():
        if parent == 0:
            root_children[char_id] = child
        else:
            deep[parent * width + char_id] = child
    edge_keys, edge_nodes = _hash_table(deep)
    normal = np.array([i for i in pieces.values()], np.int64)
    unknown = np.float32(scores[normal].min() - np.float32(UNKNOWN_PENALTY))
    return UnigramTables(
        char_ids, root_children, edge_keys, edge_nodes, np.array(node_pieces, np.int32), scores, unknown
    )


def slot(key: int, mask: int) -> int:
    """The first slot an edge key probes (the same arithmetic as `child`)."""
    mixed = (key * 0x9E3779B1) & 0x7FFFFFFFFFFFFFFF
    return (mixed ^ (mixed >> 29)) & mask


@helper
def child(node, char_id, width, root_children, edge_keys, edge_nodes):  # type: ignore[no-untyped-def]
    """The trie node one character (`char_id`) below `node`, or -1."""
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


def _hash_table(edges: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    size = 1 << max(4, (4 * len(edges) - 1).bit_length())  # load factor <= 1/4
    keys = np.full(size, -1, np.int64)
    nodes = np.full(size, -1, np.int32)
    mask = size - 1
    for key, node in edges.items():
        position = slot(key, mask)
        while keys[position] != -1:
            position = (position + 1) & mask
        keys[position] = key
        nodes[position] = node
    return keys, nodes
