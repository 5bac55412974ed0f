"""MediaWiki language-conversion markup: resolved as a zh-cn reader sees it, in clean_text and the stage."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.stages.clean import WIKI_MARKUP, CleanText, clean_text
from dataclean.text.wiki_markup import resolve_conversion_markup
from tests.conftest import FIXTURE_ROOT, SAMPLE


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # blocks as they stand in CMRC 2018 paragraphs (Chinese Wikipedia)
        ("位于-{zh-cn:克什米尔; zh-tw:喀什米尔}-地区", "位于克什米尔地区"),
        ("长度为5-{zh-cn:米; zh-hk:米; zh-tw:公尺}-", "长度为5米"),
        ("-{zh-hans:考文垂; zh-hk:高云地利;}-市", "考文垂市"),
        ("-{T|Gtk#}-Gtk#是个.NET的函式库", "Gtk#是个.NET的函式库"),
        ("皇后-{后}-与-{Dairy Queen}-", "皇后后与Dairy Queen"),
        ("空的-{}-块", "空的块"),
        ("-{H|zh-cn:软件; zh-tw:軟體;}-软件", "软件"),
        ("-{zh-tw:北韓; zh-hk:北韓;}-", "北韓"),  # no mainland form: the first
        ("-{R|zh-cn:原样}-", "zh-cn:原样"),  # raw: as written
        ("a -{ b and c }", "a -{ b and c }"),  # not a block
    ],
)
def test_blocks_show_what_a_zh_cn_reader_sees(text: str, shown: str) -> None:
    assert resolve_conversion_markup(text)[0] == shown
    assert clean_text(text) == shown


def test_stage_resolves_and_counts_the_blocks_of_real_paragraphs() -> None:
    """The rows of the bundled zh sample and of the CMRC fixture that hold markup."""
    with gzip.open(SAMPLE / "zh.jsonl.gz", "rt", encoding="utf-8") as f:
        sample = [json.loads(line)["text"] for line in f]
    fixture = (FIXTURE_ROOT / "quality" / "zh_clean.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [t for t in sample + [json.loads(line)["text"] for line in fixture] if "-{" in t]
    assert len(texts) >= 10
    table = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts})
    out = CleanText()(table)
    cleaned = out.column(C.TEXT).to_pylist()
    assert not any("-{" in t or "}-" in t for t in cleaned)
    counts = out.column(C.COUNT_PREFIX + WIKI_MARKUP).to_pylist()
    assert counts == [t.count("-{") for t in texts]
    assert cleaned == [clean_text(t) for t in texts]
    kept = CleanText(resolve_wiki_markup=False)(table).column(C.TEXT).to_pylist()
    assert kept == [clean_text(t, resolve_wiki_markup=False) for t in texts]
    assert all("-{" in t for t in kept)
