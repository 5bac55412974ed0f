"""Megatron-LM's IndexedDataset files (`PREFIX.bin` + `PREFIX.idx`), written and read with numpy.

The format, as megatron-core's `indexed_dataset.py` writes it (`_IndexWriter`) and reads it:

    PREFIX.bin  every sequence's tokens, concatenated, in the index's dtype (no header)
    PREFIX.idx  b"MMIDIDX\\x00\\x00"      magic
                <Q 1                    version
                <B dtype code           1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
                                        7 float32, 8 uint16
                <Q S                    sequence count
                <Q D                    document count + 1 (the length of the next array)
                int32[S]                tokens per sequence
                int64[S]                byte offset of each sequence in PREFIX.bin
                int64[D]                document boundaries: sequence indices, 0 first

dataclean writes one sequence per document (its tokens then the end-of-document id, as
`tools/preprocess_data.py --append-eod` does without `--split-sentences`), so the boundaries are
0, 1, ..., S. The dtype is Megatron's `DType.optimal_dtype(vocab_size)`: uint16 below 65,500
tokens in the vocabulary, else int32. megatron-core's `IndexedDataset` is the reader the tests
check these files against; this module reads them too (`read_index`, `document_tokens`) so that
`locate` and `filter` need no torch.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np

from dataclean.errors import InputError
from dataclean.io.files import atomic_output, open_input

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES: dict[str, int] = {
    "uint8": 1,
    "int8": 2,
    "int16": 3,
    "int32": 4,
    "int64": 5,
    "float64": 6,
    "float32": 7,
    "uint16": 8,
}
CODE_DTYPES = {code: np.dtype(name) for name, code in DTYPE_CODES.items()}
# megatron.core.datasets.indexed_dataset.DType.optimal_dtype: `cardinality < 65500` -> uint16
UINT16_VOCABULARY_LIMIT = 65500


def optimal_dtype(vocab_size: int) -> np.dtype:
    """The token dtype Megatron chooses for a vocabulary (`DType.optimal_dtype`)."""
    return np.dtype(np.uint16) if vocab_size < UINT16_VOCABULARY_LIMIT else np.dtype(np.int32)


def bin_path(prefix: str) -> str:
    return prefix + ".bin"


def idx_path(prefix: str) -> str:
    return prefix + ".idx"


def index_bytes(lengths: np.ndarray, dtype: np.dtype, document_indices: np.ndarray | None = None) -> bytes:
    """The whole `.idx` file of sequences of `lengths` tokens (one sequence per document unless
    `document_indices` says otherwise)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
        raise ValueError("sequence lengths must fit in int32")
    pointers = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    if document_indices is None:
        document_indices = np.arange(len(lengths) + 1, dtype=np.int64)
    header = MAGIC + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[dtype.name])
    counts = struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(document_indices))
    return b"".join(
        [
            header,
            counts,
            lengths.astype("<i4").tobytes(),
            pointers.astype("<i8").tobytes(),
            np.asarray(document_indices, dtype="<i8").tobytes(),
        ]
    )


def index_digest(prefix: str) -> str:
    """The sha256 of `PREFIX.idx` (an ids file records the one it was written for)."""
    with open_input(idx_path(prefix)) as source:
        return hashlib.sha256(source.read()).hexdigest()


def write_index(
    path: str, lengths: np.ndarray, dtype: np.dtype, document_indices: np.ndarray | None = None
) -> bytes:
    """Write an `.idx` file atomically; returns its bytes (callers hash them)."""
    data = index_bytes(lengths, dtype, document_indices)
    with atomic_output(path) as sink:
        sink.write(data)
    return data


@dataclass
class Index:
    """An `.idx` file read: the token dtype, tokens and byte offset per sequence, and the
    document boundaries (sequence indices, `documents + 1` of them)."""

    dtype: np.dtype
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray

    @property
    def documents(self) -> int:
        return len(self.document_indices) - 1

    @property
    def sequences(self) -> int:
        return len(self.sequence_lengths)

    def document_lengths(self) -> np.ndarray:
        """Tokens per document (the sum of its sequences)."""
        ends = np.r_[0, np.cumsum(self.sequence_lengths, dtype=np.int64)]
        lengths: np.ndarray = ends[self.document_indices[1:]] - ends[self.document_indices[:-1]]
        return lengths


def read_index(prefix: str) -> Index:
    """`PREFIX.idx`, checked: an error names the file when it is not an IndexedDataset index."""
    path = idx_path(prefix)
    try:
        with open_input(path) as source:
            data = source.read()
    except (OSError, FileNotFoundError) as error:
        raise InputError(path, f"cannot read the Megatron index: {error}") from error
    fixed = len(MAGIC) + 8 + 1 + 8 + 8
    if len(data) < fixed or data[: len(MAGIC)] != MAGIC:
        raise InputError(path, "not a Megatron IndexedDataset index (no MMIDIDX header)")
    (version,) = struct.unpack_from("<Q", data, len(MAGIC))
    (code,) = struct.unpack_from("<B", data, len(MAGIC) + 8)
    sequences, boundaries = struct.unpack_from("<QQ", data, len(MAGIC) + 9)
    if version != VERSION or code not in CODE_DTYPES:
        raise InputError(path, f"unknown index version {version} or dtype code {code}")
    if (
        len(data) != fixed + sequences * 12 + boundaries * 8
        and len(data) != fixed + sequences * 13 + boundaries * 8
    ):
        raise InputError(path, "index size does not match its counts (truncated or multimodal)")
    lengths = np.frombuffer(data, dtype="<i4", count=sequences, offset=fixed)
    pointers = np.frombuffer(data, dtype="<i8", count=sequences, offset=fixed + 4 * sequences)
    documents = np.frombuffer(data, dtype="<i8", count=boundaries, offset=fixed + 12 * sequences)
    return Index(CODE_DTYPES[code], lengths, pointers, documents)


class TokenReader:
    """Tokens of a prefix's sequences and documents, read from a memory map of `PREFIX.bin`."""

    def __init__(self, prefix: str, index: Index | None = None) -> None:
        self.prefix = prefix
        self.index = index if index is not None else read_index(prefix)
        try:
            self._tokens = np.memmap(bin_path(prefix), dtype=self.index.dtype, mode="r")
        except (OSError, ValueError) as error:
            raise InputError(bin_path(prefix), f"cannot read the Megatron data file: {error}") from error
        expected = int(self.index.sequence_lengths.sum(dtype=np.int64))
        if len(self._tokens) != expected:
            raise InputError(
                bin_path(prefix), f"holds {len(self._tokens):,} tokens, its index says {expected:,}"
            )

    @property
    def tokens(self) -> np.ndarray:
        """Every token of `PREFIX.bin`, as a read-only memory map."""
        return self._tokens

    def sequence(self, sequence: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Tokens of one sequence (Megatron's `IndexedDataset.get(idx, offset, length)`)."""
        start = int(self.index.sequence_pointers[sequence]) // self.index.dtype.itemsize + offset
        size = int(self.index.sequence_lengths[sequence]) - offset if length is None else length
        return np.asarray(self._tokens[start : start + size])

    def document(self, document: int) -> np.ndarray:
        """Tokens of one document: its sequences, concatenated."""
        first, last = self.index.document_indices[document : document + 2]
        if first == last:
            return np.zeros(0, dtype=self.index.dtype)
        start = int(self.index.sequence_pointers[first]) // self.index.dtype.itemsize
        size = int(self.index.sequence_lengths[first:last].sum(dtype=np.int64))
        return np.asarray(self._tokens[start : start + size])
