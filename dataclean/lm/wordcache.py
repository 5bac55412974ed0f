"""A cache of words' SentencePiece segmentations that never changes the pieces (for `compiled.py`).

SentencePiece searches a whole line, adding float32 piece scores to the score the line has
reached so far. No piece holds "▁" past its first character, so the search passes through every
word start and a line's search is its words' searches in turn, each starting from the running
score. A word's best segmentation therefore depends on that running score only through float32
rounding, which matters where two segmentations score (nearly) the same, as in a run like "0000".

So with each word we keep its margin: the smallest lead, over the word's positions, of the best
candidate over the next, computed in float64 from a zero start (exact for sums of a few float32
scores). A cached word is reused only where its margin exceeds `rounding(n, running score)`, twice
the most that float32 rounding can move a comparison there, so that SentencePiece's search would
pick the same pieces; elsewhere the word is searched again. A word whose margin is too small
already when first seen is stored with margin -1 (never reused).

Layout (numpy arrays, passed to compiled code as a tuple):
- `slots`: open-addressing table of entry numbers, -1 where empty (at most half full);
- `entries[i]`: hash, key start, key length, output start, output length, path start, path
  length, pieces (after merging unknowns), pointing into
- `keys` (code points), `outputs` (UTF-8 pieces joined by spaces), `paths` (float32 score of each
  piece on the path, to replay the running score), `ids` (from the path start: each output
  piece's id, or, for a run of unknowns, -(1 + its offset in the word's output): the ids
  `compiled.py` hands to the scorer);
- `margins[i]`, and `state`: entries and arena positions used. A full cache starts over.
"""

from __future__ import annotations

import numpy as np

from dataclean.jit import helper
from dataclean.lm.unigram import child

# Words longer than this (code points, with the "▁") are searched every time, never cached.
MAX_CACHED_WORD = 32
ENTRIES = 1 << 16
HASH, KEY, KEY_LEN, OUT, OUT_LEN, PATH, PATH_LEN, COUNT = range(8)
_ENTRIES_USED, _KEYS_USED, _OUTS_USED, _PATHS_USED = range(4)


def new_cache(entries: int = ENTRIES) -> tuple[np.ndarray, ...]:
    """Empty cache arrays: (slots, entries, margins, keys, outputs, paths, ids, state)."""
    return (
        np.full(2 * entries, -1, np.int32),
        np.zeros((entries, 8), np.int64),
        np.zeros(entries, np.float64),
        np.zeros(entries * 12, np.int32),
        np.zeros(entries * 40, np.uint8),
        np.zeros(entries * 12, np.float32),
        np.zeros(entries * 12, np.int32),
        np.zeros(4, np.int64),
    )


@helper
def rounding(n, offset, magnitude):  # type: ignore[no-untyped-def]
    """Twice the float32 rounding a search over n positions from `offset` can cause.

    Each candidate sums at most n scores onto `offset`; every partial sum is at most
    M = |offset| + (n + 1) * `magnitude` (the largest |score|) in size, and each addition rounds
    by at most M * 2**-24, so two candidates' difference moves by at most n * M * 2**-23.
    """
    return (n + 1) * (abs(np.float64(offset)) + (n + 1) * magnitude) * 2.0**-22


@helper
def word_hash(codes, start, n):  # type: ignore[no-untyped-def]
    """FNV-1a over codes[start:start + n]."""
    h = np.int64(-3750763034362895579)
    for i in range(start, start + n):
        h = (h ^ codes[i]) * np.int64(1099511628211)
    return h


@helper
def find(slots, entries, keys, h, codes, start, n):  # type: ignore[no-untyped-def]
    """(entry of the word codes[start:start + n] or -1, the slot where it is or would go)."""
    mask = len(slots) - 1
    slot = h & mask
    while True:
        entry = slots[slot]
        if entry == -1:
            return -1, slot
        if entries[entry, HASH] == h and entries[entry, KEY_LEN] == n:
            key = entries[entry, KEY]
            same = True
            for i in range(n):
                if keys[key + i] != codes[start + i]:
                    same = False
                    break
            if same:
                return entry, slot
        slot = (slot + 1) & mask


@helper
def _fits(cache, n, size, length):  # type: ignore[no-untyped-def]
    slots, entries, _, keys, outputs, paths, _, state = cache
    return (
        state[_ENTRIES_USED] + 1 <= len(entries)
        and 2 * (state[_ENTRIES_USED] + 1) <= len(slots)
        and state[_KEYS_USED] + n <= len(keys)
        and state[_OUTS_USED] + size <= len(outputs)
        and state[_PATHS_USED] + length <= len(paths)
    )


@helper
def insert(  # type: ignore[no-untyped-def]
    cache, slot, h, codes, start, n, out, out_start, out_stop, path_scores, length, count, margin,
    piece_ids, ids_start,
):  # fmt: skip
    """Store a word (codes[start:start + n]) whose pieces were written at out[out_start:out_stop]
    and whose `count` ids at piece_ids[ids_start:] (unknowns' offsets counted in `out`)."""
    slots, entries, margins, keys, outputs, paths, ids, state = cache
    size = out_stop - out_start
    if not _fits(cache, n, size, length):
        slots[:] = -1  # full: start over
        state[:] = 0
        if not _fits(cache, n, size, length):
            return  # larger than the whole cache
        _, slot = find(slots, entries, keys, h, codes, start, n)
    entry = state[_ENTRIES_USED]
    key, output, path = state[_KEYS_USED], state[_OUTS_USED], state[_PATHS_USED]
    entries[entry, HASH], entries[entry, KEY], entries[entry, KEY_LEN] = h, key, n
    entries[entry, OUT], entries[entry, OUT_LEN] = output, size
    entries[entry, PATH], entries[entry, PATH_LEN], entries[entry, COUNT] = path, length, count
    margins[entry] = margin
    for i in range(n):
        keys[key + i] = codes[start + i]
    for i in range(size):
        outputs[output + i] = out[out_start + i]
    for i in range(length):
        paths[path + i] = path_scores[i]
    for i in range(count):
        given = piece_ids[ids_start + i]
        ids[path + i] = given if given >= 0 else given + out_start  # offset within the word
    state[_ENTRIES_USED] += 1
    state[_KEYS_USED] += n
    state[_OUTS_USED] += size
    state[_PATHS_USED] += length
    slots[slot] = entry


@helper
def _offer(best, second, end, value):  # type: ignore[no-untyped-def]
    if value > best[end]:
        second[end] = best[end]
        best[end] = value
    elif value > second[end]:
        second[end] = value


@helper
def margin(ids, start, n, best, second, trie, scores, unknown):  # type: ignore[no-untyped-def]
    """The smallest lead of the best candidate over the next at any position of the word
    ids[start:start + n], searched in float64 from 0 (0 for a tie)."""
    root_children, edge_keys, edge_nodes, node_pieces = trie
    width = len(root_children)
    best[: n + 1] = -np.inf
    second[: n + 1] = -np.inf
    best[0] = 0.0
    for begin in range(n):
        node = np.int64(0)  # not the literal 0: one compile of `child`, not two
        single = False
        for end in range(begin, n):
            node = child(node, ids[start + end], width, root_children, edge_keys, edge_nodes)
            if node < 0:
                break
            piece = node_pieces[node]
            if piece >= 0:
                _offer(best, second, end + 1, np.float64(scores[piece]) + best[begin])
                single = single or end == begin
        if not single:
            _offer(best, second, begin + 1, np.float64(unknown) + best[begin])
    lead = np.inf
    for i in range(1, n + 1):
        lead = min(lead, best[i] - second[i])
    return lead
