"""The dedup building blocks: hashes, normalization, shingles, signatures, bands, components."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from datasketch import MinHash

from dataclean.dedup.components import Components
from dataclean.dedup.hashing import xxh64, xxh64_strings
from dataclean.dedup.lsh import candidate_probability, choose_bands
from dataclean.dedup.minhash import as_datasketch, band_keys, permutations, signatures
from dataclean.dedup.partition import star_edges
from dataclean.dedup.sets import jaccard, sorted_sets
from dataclean.dedup.shingles import (
    CHARACTERS,
    WORDS,
    Normalized,
    ShingleHash,
    fnv1a32,
    normalize_text,
    shingles,
    token_hashes,
)
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT / "dedup"
ENGLISH = (FIXTURES / "en_paragraphs.txt").read_text(encoding="utf-8").splitlines()
CHINESE = (FIXTURES / "zh_paragraphs.txt").read_text(encoding="utf-8").splitlines()


def test_xxh64_kernel_equals_the_xxhash_package() -> None:
    rng = random.Random(3)
    for length in [*range(0, 70), 100, 1000]:
        data = bytes(rng.randrange(256) for _ in range(length))
        buffer = np.frombuffer(b"pad" + data, dtype=np.uint8)
        for seed in (0, 7, 2**31 + 5):
            assert xxh64(buffer, 3, 3 + length, seed) == xxhash.xxh64_intdigest(data, seed)


def test_token_hashes_are_fnv1a_of_each_token() -> None:
    text = "ab cd 中文"
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    out = np.zeros(16, dtype=np.uint32)
    count = token_hashes(data, 0, len(data), WORDS, out)
    assert out[:count].tolist() == [fnv1a32(b"ab"), fnv1a32(b"cd"), fnv1a32("中文".encode())]
    count = token_hashes(data, 0, len(data), CHARACTERS, out)
    assert out[:count].tolist() == [fnv1a32(c.encode()) for c in "abcd中文"]


def test_xxh64_strings_handles_slices_and_nulls() -> None:
    array = pa.array(["skip", "héllo", None, "world" * 20]).slice(1)
    expected = [xxhash.xxh64_intdigest((text or "").encode()) for text in array.to_pylist()]
    assert xxh64_strings(array).tolist() == expected


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("  Hello,  WORLD!! 123\n", "hello world 000"),
        ("Ｆｕｌｌ-width\u200bＡＢＣ", "full widthabc"),  # NFKC; zero-width space removed
        ("tab\tand\u00a0nbsp", "tab and nbsp"),
        ("基于《跑跑卡丁车》与Nexon。", "基于 跑跑卡丁车 与nexon"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalize_text(text: str, normalized: str) -> None:
    assert normalize_text(text) == normalized


def test_folds_can_be_turned_off() -> None:
    assert normalize_text("Hello, World 42", fold=("punctuation",)) == "Hello World 42"
    assert normalize_text("Hello, World 42", fold=("case", "digits")) == "hello, world 00"


def test_modes_follow_lang_then_script() -> None:
    texts = ["基于跑跑卡丁车与泡泡堂", "hello world", "日本語のテキストです", "mixed 中文 text"]
    normalized = Normalized(texts)
    assert normalized.modes().tolist() == [CHARACTERS, WORDS, CHARACTERS, WORDS]
    langs = pa.array(["en", None, "ja-JP", "zh"])
    assert normalized.modes(langs).tolist() == [WORDS, WORDS, CHARACTERS, CHARACTERS]


def test_shingles_words_characters_and_short_texts() -> None:
    assert shingles("The quick brown fox jumps over", 5) == [
        b"the quick brown fox jumps",
        b"quick brown fox jumps over",
    ]
    chinese = [shingle.decode() for shingle in shingles("基于《跑跑卡丁车》", 5)]
    assert chinese == ["基于跑跑卡", "于跑跑卡丁", "跑跑卡丁车"]
    # Fewer tokens than the n-gram size: one shingle, the whole normalized text.
    assert shingles("Two words!", 5) == [b"two words"]
    assert shingles("中文", 5) == ["中文".encode()]
    assert shingles("", 5) == []
    assert shingles("?!", 5) == []


@pytest.mark.parametrize(("num_perm", "seed"), [(128, 1), (64, 7), (256, 0), (3, 2**32 - 1)])
def test_permutations_equal_datasketchs(num_perm: int, seed: int) -> None:
    a, b = MinHash(num_perm=num_perm, seed=seed).permutations
    ours_a, ours_b = permutations(num_perm, seed)
    assert ours_a.dtype == ours_b.dtype == np.uint32
    assert np.array_equal(ours_a, a) and np.array_equal(ours_b, b)


@pytest.mark.parametrize(("num_perm", "seed", "ngram_size"), [(128, 1, 5), (64, 7, 3)])
def test_signatures_equal_datasketch(num_perm: int, seed: int, ngram_size: int) -> None:
    texts = [*ENGLISH[:30], *CHINESE[:10], "", "a b", "!!", "中文", "a b c d e", "x " * 300]
    normalized = Normalized(texts)
    modes = normalized.modes()
    ours, hash_offsets, hashes = signatures(
        normalized.data, normalized.offsets, modes, ngram_size, num_perm, seed, keep_hashes=True
    )
    for row, text in enumerate(texts):
        hashfunc = ShingleHash(int(modes[row]))
        theirs = MinHash(num_perm=num_perm, seed=seed, hashfunc=hashfunc)
        row_shingles = shingles(text, ngram_size, int(modes[row]))
        theirs.update_batch(row_shingles)
        assert np.array_equal(theirs.hashvalues, ours[row]), text[:40]
        kept = hashes[hash_offsets[row] : hash_offsets[row + 1]]
        assert kept.tolist() == [hashfunc(shingle) for shingle in row_shingles]
    assert as_datasketch(ours[0], seed).jaccard(as_datasketch(ours[0], seed)) == 1.0


def _true_jaccard(a: str, b: str, ngram_size: int = 5) -> float:
    first, second = set(shingles(a, ngram_size)), set(shingles(b, ngram_size))
    return len(first & second) / len(first | second)


def test_jaccard_estimate_is_close_to_the_true_jaccard() -> None:
    rng = random.Random(11)
    words = " ".join(ENGLISH).split()
    errors = []
    for _ in range(40):
        start = rng.randrange(len(words) - 400)
        original = words[start : start + 300]
        edited = list(original)
        for _ in range(rng.randrange(1, 12)):
            edited[rng.randrange(len(edited))] = f"w{rng.randrange(10**6)}"
        pair = [" ".join(original), " ".join(edited)]
        normalized = Normalized(pair)
        sig, _, _ = signatures(normalized.data, normalized.offsets, normalized.modes(), 5, 256, 1)
        estimate = float(np.mean(sig[0] == sig[1]))
        truth = _true_jaccard(pair[0], pair[1])
        assert abs(estimate - truth) < 0.15
        errors.append(abs(estimate - truth))
    assert np.mean(errors) < 0.04


def test_exact_jaccard_of_shingle_sets() -> None:
    values = np.array([5, 3, 3, 9, 1, 3, 4, 9], dtype=np.uint32)
    offsets = np.array([0, 4, 8])
    sets, set_offsets = sorted_sets(values, offsets)
    assert sets.tolist() == [3, 5, 9, 1, 3, 4, 9]
    assert jaccard(sets, set_offsets, 0, 1) == pytest.approx(2 / 5)


def test_band_keys_match_when_bands_match() -> None:
    sig = np.arange(24, dtype=np.uint32).reshape(2, 12).copy()
    sig[1, :6] = sig[0, :6]  # first band of 6 rows equal, second differs
    keys = band_keys(sig, 2, 6)
    assert keys[0, 0] == keys[1, 0]
    assert keys[0, 1] != keys[1, 1]
    assert (
        band_keys(np.zeros((1, 12), np.uint32), 2, 6)[0, 0]
        != band_keys(np.zeros((1, 12), np.uint32), 2, 6)[0, 1]
    )


def test_bands_are_chosen_for_recall() -> None:
    assert choose_bands(0.7, 128) == (23, 5)
    assert choose_bands(0.8, 128) == (17, 7)
    assert candidate_probability(0.7, 23, 5) > 0.98


def test_star_edges_and_components() -> None:
    keys = np.array([7, 7, 7, 3, 3, 9], dtype=np.uint64)
    nodes = np.array([5, 2, 8, 8, 1, 4])
    edges = star_edges(keys, nodes)
    assert sorted(map(tuple, edges.tolist())) == [(5, 2), (8, 1), (8, 2)]
    components = Components(10)
    components.add(edges)
    labels = components.labels()
    assert labels.tolist() == [-1, 1, 1, -1, -1, 1, -1, -1, 1, -1]
