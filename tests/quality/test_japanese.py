"""Japanese words are SudachiPy's as FineWeb-2 counts them (dataclean.quality.japanese), and the
Japanese table's keep/drop is FineWeb-2's on the Common Crawl sample's Japanese pages."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.quality import japanese, signals
from dataclean.quality.japanese import CHUNK_BYTES, chunks, sudachi_available, word_spans
from dataclean.quality.reference import datatrove_available
from dataclean.stages import quality
from dataclean.stages.quality import JAPANESE_CHARACTERS, FilterQuality
from tests.conftest import FIXTURE_ROOT

# The 9 pages of the Common Crawl sample that lid.176 labels `ja`, with the reason datatrove gives
# each configured from FineWeb-2's jpn_Jpan (SudachiPy 0.7, sudachidict_core 20261015).
PAGES = [
    json.loads(line)
    for line in (FIXTURE_ROOT / "quality" / "ja_pages.jsonl").read_text(encoding="utf-8").splitlines()
]
needs_sudachi = pytest.mark.skipif(
    not sudachi_available(), reason="SudachiPy (the ja extra) is not installed"
)


def _run(texts: list[str], langs: list[str], **settings: str) -> pa.Table:
    table = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts, C.LANG: langs})
    return FilterQuality(**settings)(table)  # type: ignore[arg-type]


@needs_sudachi
def test_japanese_pages_keep_and_drop_as_fineweb2() -> None:
    """All 9 pages: kept where datatrove keeps them, dropped where it drops them, and for its
    reason where that is a word rule: the page whose repeated SudachiPy 5-grams cover 0.367 of its
    characters (FineWeb-2's limit 0.243) is dropped, which one word per character (0.209) kept."""
    reasons = _run([p["text"] for p in PAGES], ["ja"] * len(PAGES)).column(C.DROP_REASON).to_pylist()
    assert [r is None for r in reasons] == [p["datatrove"] is None for p in PAGES]
    for page, reason in zip(PAGES, reasons, strict=True):
        if page["datatrove"] in ("duplicated_5_n_grams", "top_3_gram"):
            assert reason == page["datatrove"], page["id"]


@needs_sudachi
@pytest.mark.skipif(
    not datatrove_available(), reason="datatrove and spaCy (the test extra) are not installed"
)
def test_japanese_words_are_datatroves() -> None:
    """The words equal datatrove's Japanese tokenizer's (spaCy `ja` over SudachiPy) on the 9 pages
    and on a text of more than 40,000 bytes, which both cut into the same pieces first."""
    from datatrove.utils.word_tokenizers import chunk_text_on_bytes, load_word_tokenizer

    theirs = load_word_tokenizer("jpn_Jpan")
    long = "\n".join(p["text"] for p in PAGES) * 3
    assert len(long.encode("utf-8")) > 2 * CHUNK_BYTES
    assert chunks(long) == chunk_text_on_bytes(long, CHUNK_BYTES)
    for text in [p["text"] for p in PAGES] + [long]:
        assert [text[a:b] for a, b in word_spans(text)] == theirs.word_tokenize(text)


def test_pieces_cover_the_text_within_the_byte_limit() -> None:
    text = "東京都に住んでいる。" * 3000 + "終わり"
    pieces = chunks(text)
    assert "".join(pieces) == text and len(pieces) > 1
    assert max(len(p.encode("utf-8")) for p in pieces) <= CHUNK_BYTES
    assert chunks("") == [] and chunks("短い") == ["短い"]


@needs_sudachi
def test_sudachi_words_only_for_the_japanese_table() -> None:
    """SudachiPy's words are counted for `ja` rows; the same text labeled `zh` keeps jieba's."""
    text = PAGES[2]["text"]
    out = _run([text, text], ["ja", "zh"], mode="annotate")
    words = [s["words"] for s in out.column(C.QUALITY_SIGNALS).to_pylist()]
    # datatrove's count for this page: SudachiPy's words not made only of punctuation
    assert words[0] == 3003 and words[1] != 3003
    assert f"{C.COUNT_PREFIX}{JAPANESE_CHARACTERS}" not in out.column_names


def test_without_sudachi_japanese_rows_count_characters_and_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the `ja` extra the Japanese table counts one word per kana or Han character, as
    before it, and the stage counts those rows (stats and report: `japanese_characters_as_words`)."""
    for module in (japanese, signals, quality):
        monkeypatch.setattr(module, "sudachi_available", lambda: False)
    text = "東京都に住んでいる。今日は晴れです。"
    out = _run([text, "Plain English text."], ["ja", "en"], mode="annotate")
    assert out.column(f"{C.COUNT_PREFIX}{JAPANESE_CHARACTERS}").to_pylist() == [1, 0]
    assert out.column(C.QUALITY_SIGNALS).to_pylist()[0]["words"] == len(text) - 2  # 。 is no word
