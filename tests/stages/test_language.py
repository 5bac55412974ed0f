"""Language identification: labels from outside sources, fastText's own predict, the stage."""

from __future__ import annotations

import json

import fasttext
import numpy as np
import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.dedup.shingles import CHARACTERS, WORDS, Normalized
from dataclean.errors import ConfigError
from dataclean.lang import UNKNOWN, bundled_model_path, identify_languages, load_identifier
from dataclean.lang.fasttext import predict, utf8_buffers
from dataclean.lang.labels import lid176_labels
from dataclean.run.config import parse_settings, select_stages
from dataclean.stages.language import IdentifyLanguage
from pipelines.default import build
from tests.conftest import FIXTURE_ROOT, SAMPLE, sample_web_texts

FIXTURES = FIXTURE_ROOT
SAMPLE_WEB = SAMPLE / "web.jsonl"


def _udhr() -> list[tuple[str, str]]:
    lines = (FIXTURES / "lang" / "udhr_article1.tsv").read_text(encoding="utf-8").splitlines()
    return [(code, text) for code, text in (line.split("\t", 1) for line in lines)]


def _lines(name: str) -> list[str]:
    return [line for line in (FIXTURES / "lm" / name).read_text(encoding="utf-8").splitlines() if line]


def _codes(texts: list[str]) -> list[str]:
    codes, _scores = identify_languages(pa.array(texts, pa.string()))
    return [str(code) for code in codes.to_pylist()]


def test_udhr_article_1_in_23_languages() -> None:
    udhr = _udhr()
    assert len({code for code, _ in udhr}) == 23
    assert _codes([text for _, text in udhr]) == [code for code, _ in udhr]


def test_long_paragraphs_and_single_sentences() -> None:
    english, chinese = _lines("wikitext2_test_en.txt"), _lines("cmrc2018_heldout_zh.txt")
    assert len(english) >= 200 and len(chinese) >= 100
    assert np.mean([code == "en" for code in _codes(english)]) >= 0.99
    assert np.mean([code == "zh" for code in _codes(chinese)]) >= 0.99
    # Single sentences (short) of the same texts.
    sentences = [s.strip() + "." for text in english[:40] for s in text.split(". ")[:2] if len(s) > 40]
    assert np.mean([code == "en" for code in _codes(sentences)]) >= 0.95


def _han(text: str) -> int:
    return sum("\u4e00" <= ch <= "\u9fff" for ch in text)


def _latin(text: str) -> int:
    """Latin letters: ASCII, Latin-1 and Latin Extended-A/B (é, ł, ș...)."""
    return sum(ch.isalpha() and (ch.isascii() or "\u00c0" <= ch <= "\u024f") for ch in text)


def _jieba_words(text: str) -> int:
    """Han words as jieba cuts them (the outside count of what Chinese prose carries)."""
    import jieba

    jieba.setLogLevel(60)
    return sum(1 for word in jieba.cut(text) if any("\u4e00" <= ch <= "\u9fff" for ch in word))


@pytest.mark.parametrize("chinese_share", [0.2, 0.35, 0.45, 0.55, 0.65, 0.8])
def test_mixed_chinese_english_gets_the_language_with_more_words(chinese_share: float) -> None:
    """Real Chinese and English paragraphs joined; the truth is which holds more words: jieba's
    Han words against English words (whitespace-separated). Letters would say otherwise: an
    English word has about 5 letters, a Chinese word 1.8 characters."""
    pytest.importorskip("jieba")
    english = " ".join(_lines("wikitext2_test_en.txt")).split(" ")
    chinese = "".join(_lines("cmrc2018_heldout_zh.txt"))
    texts, expected = [], []
    for number in range(20):
        total = 700  # letters: the whole text stays within the 2,000 characters read
        zh = chinese[number * 500 :]
        cut = 0
        while _han(zh[:cut]) < total * chinese_share:
            cut += 1
        zh = zh[:cut]
        words = english[number * 400 :]
        count = 0
        while _latin(" ".join(words[:count])) < total * (1 - chinese_share):
            count += 1
        en = " ".join(words[:count])
        zh_words, en_words = _jieba_words(zh), sum(1 for w in en.split() if any(c.isalpha() for c in w))
        if max(zh_words, en_words) < 1.2 * min(zh_words, en_words):
            continue  # too close to call by any count
        # Chinese first or English first, as paragraphs.
        texts.append(f"{zh}\n\n{en}" if number % 2 else f"{en}\n\n{zh}")
        expected.append("zh" if zh_words > en_words else "en")
    assert _codes(texts) == expected


def test_chinese_technical_pieces_with_english_terms_and_code_are_chinese() -> None:
    """A Chinese article with English terms and real code blocks, cut into pieces (some a code block
    with the one sentence that introduces it: lid.176 alone calls two of those `ko` and `hr`)."""
    rows = [
        json.loads(line)
        for line in (FIXTURES / "quality" / "zh_code_switched.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(rows) >= 25 and sum(row["has_code"] for row in rows) >= 5
    assert _codes([row["text"] for row in rows]) == ["zh"] * len(rows)


def test_english_prose_quoting_chinese_names_stays_english() -> None:
    english = [line for line in _lines("wikitext2_test_en.txt") if len(line) > 300][:20]
    names = ["红楼梦", "曹雪芹", "北京大学", "长城", "孔子"]
    quoted = [text.replace(" the ", f" the {names[k % len(names)]} ", 3) for k, text in enumerate(english)]
    assert _codes(quoted) == ["en"] * len(quoted)


def test_kernel_equals_fasttext_predict_on_real_text() -> None:
    """Our fastText loop against fastText's own C++ predict (fasttext-predict) on the same model."""
    reference = fasttext.load_model(str(bundled_model_path()))
    texts = [text for _, text in _udhr()] + _lines("cmrc2018_heldout_zh.txt")[:40] + sample_web_texts()
    texts += [
        "",
        "  ",
        "__label__en only a label",
        "a",
        "<>",
        "emoji 😀 and ZWJ 👩‍👩‍👧",
        "tab\tand\vvt\x00nul",
    ]
    model = load_identifier()
    found = predict(model, *utf8_buffers(pa.array(texts, pa.string())), 2000, ("en", "zh"))
    for row, text in enumerate(texts):
        labels, probs = reference.predict(text[:2000].replace("\n", " "), k=176)
        by_label = {label.removeprefix("__label__"): p for label, p in zip(labels, probs, strict=True)}
        assert model.labels[found.top[row]] == labels[0].removeprefix("__label__"), text[:80]
        assert found.top_prob[row] == pytest.approx(probs[0], abs=1e-6)
        for column, code in enumerate(("en", "zh")):
            # fastText leaves out labels under 1e-5 (its search prunes them).
            assert found.wanted_prob[row, column] == pytest.approx(by_label.get(code, 0.0), abs=1e-5)


def test_stage_labels_filters_and_keeps_given_labels() -> None:
    udhr = dict(_udhr())
    table = pa.table(
        {
            C.ID: ["en", "de", "zh", "ja", "digits", "short"],
            C.TEXT: [udhr["en"], udhr["de"], udhr["zh"], udhr["ja"], "12 345 !!", "ok"],
        }
    )
    out = IdentifyLanguage()(table)
    assert out.column(C.LANG).to_pylist()[:5] == ["en", "de", "zh", "ja", UNKNOWN]
    scores = out.column(C.LANG_SCORE)
    assert scores.type == pa.float64() and scores[4].as_py() is None and scores[0].as_py() > 0.9
    assert out.column(C.DROP_REASON).null_count == table.num_rows  # the default keeps every row
    # keep=zh,en with a minimum score: other languages and uncertain labels are dropped.
    filtered = IdentifyLanguage(keep=("zh", "en"), min_score=0.5)(table)
    reasons = filtered.column(C.DROP_REASON).to_pylist()
    assert reasons[:5] == [None, "de", None, "ja", UNKNOWN]
    short_lang, short_score = out.column(C.LANG)[5].as_py(), out.column(C.LANG_SCORE)[5].as_py()
    if short_score < 0.5:
        assert reasons[5] in (f"uncertain:{short_lang}", short_lang)
    # A label in the input is kept (empty or null ones are filled in) unless relabel is on.
    given = table.append_column(C.LANG, pa.array(["fr", None, "", "ja", None, None]))
    kept = IdentifyLanguage()(given)
    assert kept.column(C.LANG).to_pylist()[:4] == ["fr", "de", "zh", "ja"]
    assert kept.column(C.LANG_SCORE)[0].as_py() is None
    assert IdentifyLanguage(relabel=True)(given).column(C.LANG).to_pylist()[0] == "en"


def test_language_stage_is_in_the_default_recipe_right_after_clean_and_pii() -> None:
    names = [stage.name for stage in build()]
    assert names[names.index("clean") + 1 : names.index("clean") + 3] == ["pii", "language"]


def test_dedup_shingles_follow_the_real_language() -> None:
    """Japanese and Thai are shingled by characters, Korean (spaced words) and und by words/script."""
    udhr = dict(_udhr())
    texts = [udhr["ja"], udhr["th"], udhr["ko"], udhr["zh"], udhr["en"], "12 34 56 78 90 11"]
    langs, _ = identify_languages(pa.array(texts, pa.string()))
    assert langs.to_pylist() == ["ja", "th", "ko", "zh", "en", UNKNOWN]
    modes = Normalized(texts).modes(langs)
    assert modes.tolist() == [CHARACTERS, CHARACTERS, WORDS, CHARACTERS, WORDS, WORDS]


def test_shipped_label_list_is_the_models() -> None:
    """`dataclean/data/lang/lid176_labels.txt`, which `keep` is checked against before a run, holds
    exactly the labels of the bundled lid.176."""
    assert lid176_labels() == tuple(load_identifier().labels)


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (
            "zh,eng",
            r"^language\.keep: 'eng' is not a language code of lid\.176 .*use 'en' for 'eng' \(English\)$",
        ),
        ("zz,xx", r"^language\.keep: 'zz', 'xx' are not language codes of lid\.176 \(ISO 639-1"),
        ("zho", r"use 'zh' for 'zho' \(Chinese\)"),
    ],
)
def test_keep_rejects_codes_the_model_does_not_label(keep: str, message: str) -> None:
    """A 3-letter code or a typo would drop every row of that language without a word: it is a
    one-line ConfigError when the stage is built (from --set, before any row is read)."""
    with pytest.raises(ConfigError, match=message) as raised:
        select_stages(build(), [], [], parse_settings([f"language.keep={keep}"]))
    assert "\n" not in str(raised.value)
    assert IdentifyLanguage(keep=("zh", "en", "yue", "und")).keep == ("zh", "en", "yue", "und")
