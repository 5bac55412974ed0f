"""The compiled Chinese segmenter against jieba itself on real text (CMRC 2018, 红楼梦)."""

from __future__ import annotations

import json
import re

import pytest

from dataclean.quality.segmenter import segment
from dataclean.quality.tokenizer import STYLES, words
from tests.conftest import FIXTURE_ROOT

HAN = re.compile("[\u4e00-\u9fd5]+")


def _texts() -> list[str]:
    lines = (FIXTURE_ROOT / "quality" / "zh_clean.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines]


def test_han_words_are_jiebas_on_real_text() -> None:
    """The Han words of 80 real passages: equal to jieba's (default mode) on at least 97% of the
    passages and 99.8% of the words; what differs is jieba's few dictionary words that mix Han
    and Latin letters (`B型`, `C语言`), which the quality pass cuts at the script boundary."""
    jieba = pytest.importorskip("jieba")
    jieba.setLogLevel(60)
    same_texts = same_words = total_words = 0
    for text in _texts():
        ours = [w for w in segment(text) if HAN.fullmatch(w)]
        theirs = [w for w in jieba.cut(text) if HAN.fullmatch(w)]
        same_texts += ours == theirs
        total_words += len(theirs)
        same_words += len(set(_spans(text, ours)) & set(_spans(text, theirs)))
    assert same_texts >= 0.97 * len(_texts()), same_texts
    assert same_words >= 0.998 * total_words, (same_words, total_words)


def _spans(text: str, found: list[str]) -> list[tuple[int, int]]:
    spans, at = [], 0
    for word in found:
        at = text.index(word, at)
        spans.append((at, at + len(word)))
        at += len(word)
    return spans


def test_quality_words_of_code_switched_chinese() -> None:
    """In the Chinese rules, Han runs are jieba's words and Latin words stay words."""
    text = "我们在训练大模型时监控loss和grad norm，并定期保存checkpoint。"
    assert words(text, han=True, style=STYLES["segment"]) == [
        "我们", "在", "训练", "大", "模型", "时", "监控", "loss", "和", "grad", "norm", "，",
        "并", "定期", "保存", "checkpoint", "。",
    ]  # fmt: skip
    assert words("中文，English。", han=True) == ["中", "文", "，", "English", "。"]
