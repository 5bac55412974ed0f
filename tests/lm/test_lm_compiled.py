"""The compiled tokenizer gives exactly SentencePiece's pieces, on real held-out text and edge cases."""

from __future__ import annotations

import io
import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import sentencepiece as spm

from dataclean.lm import load_model, normalize_lines, normalize_text
from dataclean.lm.charmap import IDENTITY, UNSAFE, normalization_table
from dataclean.lm.compiled import CompiledTokenizer, compile_tokenizer
from dataclean.lm.model import LanguageModel
from dataclean.lm.unigram import is_supported, read_unigram
from dataclean.lm.wordcache import MAX_CACHED_WORD, new_cache
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT
# SentencePiece rebases its running score since 0.2.2: older versions segment long lines otherwise.
NEW_SENTENCEPIECE = tuple(int(part) for part in spm.__version__.split(".")[:3]) >= (0, 2, 2)

EDGE_CASES = [
    "",
    "   \n\n \t ",
    "Tabs\tand\x0bcontrols\x00glue\x07words, CRLF\r\nline two",
    "Café NAÏVE Ångström, e\u0301 and ﬁ ligatures; İstanbul",
    "In 2024, 3.14 and ٣ and １２ — “quoted” … 你好，世界。",
    "ΟΔΟΣ ΣΑΣ Σ σ: a capital sigma is lowercased by context",
    "kept combining marks: \u1b44\u302e\u0f71 \ua953x",
    "spaces: a\u00a0b\u3000c\u2028d\u2009e\u200bf",
    "▁ ▁▁x SentencePiece's own symbol",
    "unknown ☃☃☃ runs ☃x☃ 😀😀 𠀀𠀁 \ufffd",
    "0000 00000 000000 0000000 ..... ...... ------- ======= !!!!!!!",
    "a" * 100 + " " + "supercalifragilistic" * 4 + " " + "长" * (MAX_CACHED_WORD + 5),
    "\n".join(["one line", "", "  another   line  ", "last"]),
]


def _texts() -> list[str]:
    texts = (FIXTURES / "lm" / "wikitext2_test_en.txt").read_text(encoding="utf-8").splitlines()
    texts += (FIXTURES / "lm" / "cmrc2018_heldout_zh.txt").read_text(encoding="utf-8").splitlines()
    texts += (FIXTURES / "lm" / "boilerplate_en.txt").read_text(encoding="utf-8").splitlines()
    with (FIXTURES / "split" / "real_docs.jsonl").open(encoding="utf-8") as lines:
        texts += [json.loads(line)["text"] for line in lines]
    return texts + EDGE_CASES


def _reference(model: LanguageModel, texts: list[str]) -> tuple[list[bytes], list[int]]:
    """`normalize_lines` then SentencePiece itself, line by line."""
    lines: list[bytes] = []
    owners: list[int] = []
    for index, text in enumerate(texts):
        normalized = normalize_lines(text)
        lines += [line.encode("utf-8") for line in model.tokenizer.tokenize_lines(normalized)]
        owners += [index] * len(normalized)
    return lines, owners


def _check(model: LanguageModel, compiled: CompiledTokenizer, texts: list[str]) -> None:
    tokenized = compiled.tokenize(pa.array(texts, pa.string()))
    lines, owners = _reference(model, texts)
    assert tokenized.texts.tolist() == owners
    for got, expected in zip(tokenized.lines, lines, strict=True):
        assert got == expected
    assert tokenized.pieces.tolist() == [line.count(b" ") + 1 for line in lines]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pieces_equal_sentencepiece_on_held_out_text_and_edge_cases(lang: str) -> None:
    model = load_model(lang)
    assert model.compiled is not None
    texts = _texts()
    _check(model, model.compiled, texts)
    _check(model, model.compiled, texts)  # again, from a warm word cache


def test_a_tiny_word_cache_that_keeps_starting_over_changes_nothing() -> None:
    model = load_model("en")
    assert model.compiled is not None
    model.compiled.cache = new_cache(entries=16)
    _check(model, model.compiled, _texts()[:120] + EDGE_CASES)


@pytest.mark.skipif(not NEW_SENTENCEPIECE, reason="SentencePiece < 0.2.2 does not rebase its score")
def test_lines_long_enough_for_sentencepiece_to_rebase_its_score() -> None:
    """Past a running score of -1e5 (~15,000 pieces) SentencePiece re-bases it, and so do we."""
    model = load_model("en")
    assert model.compiled is not None
    prose = (FIXTURES / "lm" / "wikitext2_test_en.txt").read_text(encoding="utf-8").replace("\n", " ")
    texts = [prose, "☃" * 4100 + " bertha", "the cat sat on the mat and " * 2400 + "bertha"]
    _check(model, model.compiled, texts)


def test_chunked_sliced_large_and_null_inputs() -> None:
    model = load_model("en")
    assert model.compiled is not None
    texts = ["First text here.", None, "Σ at the end: ΟΔΟΣ", "Last one."]
    expected = model.compiled.tokenize(pa.array([t or "" for t in texts]))
    for array in (
        pa.chunked_array([texts[:2], texts[2:]]),
        pa.array(["skipped", *texts], pa.large_string()).slice(1),
    ):
        got = model.compiled.tokenize(array)
        assert got.lines == expected.lines and got.texts.tolist() == expected.texts.tolist()


def test_perplexities_are_those_of_sentencepiece_scoring() -> None:
    compiled, reference = load_model("zh"), load_model("zh")
    reference.compiled = None  # the SentencePiece path
    texts = _texts()[250:330] + EDGE_CASES
    assert np.array_equal(compiled.perplexities(texts), reference.perplexities(texts), equal_nan=True)


def test_the_table_normalizes_each_character_as_normalize_text_does() -> None:
    table = normalization_table()
    for code in [*range(0xD800), *range(0xE000, 0x10000), *range(0x1F000, 0x1F700), 0x20000]:
        k = table.index[code]
        if k == UNSAFE:
            continue
        # The table also turns whitespace into a space (normalize_lines collapses it).
        expected = "".join(" " if c.isspace() and c != "\n" else c for c in normalize_text(chr(code)))
        got = chr(code) if k == IDENTITY else "".join(map(chr, table.pool[k + 1 : k + 1 + table.pool[k]]))
        assert got == expected, hex(code)
    # Unsafe: the capital sigma (lowercased by context) and kept combining characters (reordered).
    assert table.index[0x3A3] == UNSAFE and table.index[0x302E] == UNSAFE
    assert all(unicodedata.combining(chr(c)) == 0 for c in range(sys.maxunicode + 1) if table.index[c] == 0)


def test_models_the_compiled_tokenizer_does_not_reproduce_fall_back_to_sentencepiece() -> None:
    byte_fallback = (FIXTURES / "split" / "tiny_en_bytefallback.model").read_bytes()
    assert not is_supported(byte_fallback) and read_unigram(byte_fallback) is None
    assert compile_tokenizer(byte_fallback) is None
    bundled = load_model("en").directory / "tokenizer.model"
    assert is_supported(bundled.read_bytes())
    # User-defined symbols score by length in SentencePiece: not reproduced, so not read.
    with_symbols = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([" hello world, foo bar <x>"] * 50),
        model_writer=with_symbols,
        vocab_size=30,
        user_defined_symbols=["<x>"],
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    assert not is_supported(with_symbols.getvalue())


def test_the_shipped_normalization_table_is_current_and_equals_the_built_one() -> None:
    """The package ships the table so workers do not spend half a second building it; after a
    change to the normalization, `python scripts/build_charmap.py` must rebuild it."""
    from dataclean.lm import charmap

    with np.load(charmap.shipped_path()) as saved:
        assert str(saved["fingerprint"]) == charmap.fingerprint(), "run python scripts/build_charmap.py"
    charmap._shipped.cache_clear()
    shipped = charmap._shipped()
    assert shipped is not None
    built = charmap.build_normalization_table()
    assert np.array_equal(shipped["index"], built.index) and np.array_equal(shipped["pool"], built.pool)
    assert int(shipped["expansion"]) == built.expansion
    assert np.array_equal(shipped["whitespace"], charmap._build_whitespace_codes())


def test_a_stale_shipped_table_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclean.lm import charmap

    monkeypatch.setattr(charmap, "fingerprint", lambda: "built from another normalization")
    charmap._shipped.cache_clear()
    try:
        assert charmap._shipped() is None
    finally:
        charmap._shipped.cache_clear()


def test_unigram_tables_come_back_from_the_cache_equal_and_a_broken_cache_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import fields

    from dataclean.lm import unigram

    model = load_model("zh")  # (loaded before the cache moves to tmp_path)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # (read at each call; numba's own is fixed)
    proto = (model.directory / "tokenizer.model").read_bytes()
    path = unigram._cache_path(proto)
    assert path is not None and not path.exists()
    built = read_unigram(proto)
    assert built is not None and path.is_file()
    cached = unigram._load_cached(path)
    assert cached is not None
    for field in fields(built):
        a, b = getattr(built, field.name), getattr(cached, field.name)
        assert a.dtype == b.dtype and np.array_equal(a, b), field.name
    # The tokenizer built from the cache segments as SentencePiece does.
    _check(model, CompiledTokenizer(cached), _texts())
    path.write_bytes(b"not an npz")  # a broken file is rebuilt, never an error
    assert unigram._load_cached(path) is None
    rebuilt = read_unigram(proto)
    assert rebuilt is not None and np.array_equal(rebuilt.edge_keys, built.edge_keys)
    assert unigram._load_cached(path) is not None
