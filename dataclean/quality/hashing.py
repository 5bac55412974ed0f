"""Hash sets of strings for compiled code: FNV-1a over code points and an open-addressing table.

The quality tokenizer's special cases and word lists, and the line and n-gram hashes of the quality
rules, are looked up this way, so compiled code needs no Python strings or dicts.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.jit import helper

_MASK = (1 << 64) - 1
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv_hash(text: str) -> int:
    """FNV-1a over code points, as `_fnv` computes it in compiled code (for the tables)."""
    value = FNV_OFFSET
    for ch in text:
        value = ((value ^ ord(ch)) * FNV_PRIME) & _MASK
    return value


@helper
def _fnv(cps, start, end):  # type: ignore[no-untyped-def]
    value = np.uint64(FNV_OFFSET)
    for i in range(start, end):
        value = (value ^ np.uint64(cps[i])) * np.uint64(FNV_PRIME)
    return value


def hash_set(hashes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """An open-addressing table of `hashes` (none of them 0) for `_find`: (slots, index of the
    hash in `hashes` per slot)."""
    size = 1 << max(4, (4 * len(hashes)).bit_length())
    keys = np.zeros(size, np.uint64)
    values = np.full(size, -1, np.int64)
    for index, value in enumerate(hashes):
        slot = (value ^ (value >> 29)) & (size - 1)
        while keys[slot] and int(keys[slot]) != value:
            slot = (slot + 1) & (size - 1)
        keys[slot] = value
        values[slot] = index
    return keys, values


def _index(table: tuple[np.ndarray, np.ndarray], value: int) -> int:
    """`_find` in Python (-1 for the empty slots of a `hash_set`)."""
    if value == 0:
        return -1
    keys, values = table
    slot = (value ^ (value >> 29)) & (len(keys) - 1)
    while keys[slot]:
        if int(keys[slot]) == value:
            return int(values[slot])
        slot = (slot + 1) & (len(keys) - 1)
    return -1


@helper
def _find(table, value):  # type: ignore[no-untyped-def]
    """The index `hash_set` gave `value`, or -1."""
    keys, values = table
    mask = np.uint64(len(keys) - 1)
    slot = np.int64((value ^ (value >> np.uint64(29))) & mask)
    while keys[slot] != 0:
        if keys[slot] == value:
            return values[slot]
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    return -1


class Packer:
    """Several tables in two flat arrays, as compiled code takes them (`packed_set`,
    `packed_ints`, `packed_value`): (hashes, uint64; ints, int64). A `hash_set`'s keys and values
    share a range of both arrays; other tables are ranges of `ints`. The first `2 * slots` ints
    are a header: per slot, a table's start and length, or a number. One pair of arrays crosses
    a compiled call where a tuple of one array per table would be passed (and compiled) member by
    member."""

    def __init__(self, slots: int) -> None:
        self.header = np.zeros(2 * slots, np.int64)
        self.hashes: list[np.ndarray] = [np.zeros(2 * slots, np.uint64)]
        self.ints: list[np.ndarray] = [self.header]
        self.size = 2 * slots

    def _add(self, slot: int, keys: np.ndarray, values: np.ndarray) -> None:
        self.header[2 * slot], self.header[2 * slot + 1] = self.size, len(values)
        self.hashes.append(keys.astype(np.uint64))
        self.ints.append(values.astype(np.int64))
        self.size += len(values)

    def set(self, slot: int, table: tuple[np.ndarray, np.ndarray]) -> None:
        """A `hash_set` at `slot`."""
        self._add(slot, table[0], table[1])

    def array(self, slot: int, values: np.ndarray) -> None:
        """An integer array at `slot`."""
        self._add(slot, np.zeros(len(values), np.uint64), values)

    def value(self, slot: int, value: int) -> None:
        """A number at `slot`."""
        self.header[2 * slot] = value

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.hashes), np.concatenate(self.ints)


@helper
def packed_set(packed, slot):  # type: ignore[no-untyped-def]
    """The `hash_set` a `Packer` put at `slot` (views of the packed arrays)."""
    hashes, ints = packed
    start = ints[2 * slot]
    end = start + ints[2 * slot + 1]
    return hashes[start:end], ints[start:end]


@helper
def packed_ints(packed, slot):  # type: ignore[no-untyped-def]
    """The integer array a `Packer` put at `slot` (a view)."""
    ints = packed[1]
    start = ints[2 * slot]
    return ints[start : start + ints[2 * slot + 1]]


@helper
def packed_value(packed, slot):  # type: ignore[no-untyped-def]
    """The number a `Packer` put at `slot`."""
    return packed[1][2 * slot]
