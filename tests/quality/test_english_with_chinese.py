"""English documents with Chinese in them: Han runs are jieba's words, code blocks and links are
not prose, and English keeps datatrove's words everywhere else.

The documents are real English prose (the Common Crawl pages datatrove keeps, `cc_pages.jsonl`)
quoting real Chinese (sentences of 红楼梦 and names and titles of CMRC 2018 paragraphs,
`zh_clean.jsonl`), some with a real code block (the ones of `zh_code_switched.jsonl`). The
references are jieba (a dependency: the segmenter FineWeb-2 counts Chinese with) for the Han
runs and spaCy's blank English tokenizer (datatrove's) for the rest.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.quality.reference import datatrove_available
from dataclean.quality.signals import INDEX
from dataclean.quality.tokenizer import STYLES, words
from dataclean.stages.quality import FilterQuality
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT / "quality"
HAN_RUN = re.compile("[\u4e00-\u9fd5]+")
needs_spacy = pytest.mark.skipif(not datatrove_available(), reason="spaCy (the test extra) is not installed")


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]


def _english_pages() -> list[str]:
    """The fixture's pages datatrove keeps that are English prose (not its French, Korean or
    Italian ones)."""
    return [
        r["text"] for r in _rows("cc_pages.jsonl") if r["datatrove"] is None and r["text"].count(" the ") >= 5
    ]


def _chinese_quotes() -> list[str]:
    """Sentences of 红楼梦 of 12-40 characters, and titles (《...》) of CMRC 2018 paragraphs."""
    rows = _rows("zh_clean.jsonl")
    sentences = [
        s.strip()
        for r in rows
        if r["source"] == "hongloumeng"
        for s in re.findall(r"[^。！？\n]*[。！？]", r["text"])
        if 12 <= len(s.strip()) <= 40 and "“" not in s and "”" not in s
    ]
    titles = [t for r in rows if r["source"] == "cmrc2018" for t in re.findall(r"《[^》]{2,12}》", r["text"])]
    return [q for pair in zip(sentences, titles, strict=False) for q in pair]


def _code_blocks() -> list[str]:
    return [
        re.search(r"```.*?```", r["text"], re.S).group(0)  # type: ignore[union-attr]
        for r in _rows("zh_code_switched.jsonl")
        if r["has_code"]
    ]


def _quoting(page: str, quotes: list[str], code: str = "") -> str:
    """The page with a quote before the last period of each of its first long paragraphs (and a
    code block after the first), as an English article quotes a Chinese novel or names a Chinese
    source."""
    paragraphs = page.split("\n")
    out, left = [], list(quotes)
    for paragraph in paragraphs:
        end = re.search(r"\.[\"”]?$", paragraph)
        if left and len(paragraph.split()) >= 12 and end:
            paragraph = f"{paragraph[: end.start()]} ({left.pop(0)}){end.group(0)}"
            if code and len(left) == len(quotes) - 1:
                paragraph += "\n\n" + code + "\n"
        out.append(paragraph)
    return "\n".join(out)


def _documents(with_code: bool = False) -> list[str]:
    quotes, blocks = _chinese_quotes(), _code_blocks()
    return [
        _quoting(page, quotes[3 * k : 3 * k + 3], blocks[k % len(blocks)] if with_code else "")
        for k, page in enumerate(_english_pages())
    ]


def _signals(texts: list[str], stage: FilterQuality | None = None) -> np.ndarray:
    table = pa.table({C.TEXT: texts, C.LANG: ["en"] * len(texts)})
    values, _ = (stage or FilterQuality()).signals(table)
    return values


def _reasons(texts: list[str]) -> list[str | None]:
    table = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts, C.LANG: ["en"] * len(texts)})
    return FilterQuality()(table).column(C.DROP_REASON).to_pylist()


def test_the_documents_quote_chinese() -> None:
    documents = _documents()
    assert len(documents) >= 6
    assert all(len(HAN_RUN.findall(d)) >= 3 for d in documents)


@needs_spacy
def test_han_runs_are_jiebas_words_and_the_rest_spacys() -> None:
    """The words of an English document with Chinese in it: jieba's words of its Han runs and
    spaCy English's tokens of the rest, as the stage counts them."""
    import jieba
    import spacy

    jieba.setLogLevel(60)
    nlp = spacy.blank("en")
    documents = _documents()
    counts = _signals(documents)[:, INDEX["tokens"]]
    for text, count in zip(documents, counts, strict=True):
        expected = [w for run in HAN_RUN.findall(text) for w in jieba.lcut(run)]
        expected += [t.text for t in nlp(HAN_RUN.sub(" ", text)) if t.text.strip()]
        assert Counter(words(text, style=STYLES["segment"])) == Counter(expected)
        assert count == len(expected)


def test_english_quoting_chinese_is_english_and_kept() -> None:
    """Pages datatrove keeps, with Chinese quoted in them (and a code block): the language stage
    calls them English, and the quality stage keeps them."""
    from dataclean.stages.language import IdentifyLanguage

    documents = _documents() + _documents(with_code=True)
    table = pa.table({C.ID: [str(i) for i in range(len(documents))], C.TEXT: documents})
    assert IdentifyLanguage()(table).column(C.LANG).to_pylist() == ["en"] * len(documents)
    assert _reasons(documents) == [None] * len(documents)


def test_a_quoted_chinese_passage_keeps_the_english_words_length() -> None:
    """A page quoting a whole passage of 红楼梦 (400 characters, some 200 of jieba's words of
    1-2 characters): its Chinese words count as words, but English's mean word length (3 to 10
    characters) judges its English words, so the mean stays the page's own and the page is kept
    (over every word the mean fell to 2.9-4.0 characters, under 3 on 2 of these 8 pages)."""
    pages = _english_pages()
    passages = [r["text"][:400].strip() for r in _rows("zh_clean.jsonl") if r["source"] == "hongloumeng"]
    quoting = []
    for page, passage in zip(pages, passages, strict=False):
        lines = page.split("\n")
        quoting.append("\n".join([*lines[: len(lines) // 2], passage, *lines[len(lines) // 2 :]]))
    before, after = _signals(pages), _signals(quoting)
    assert (after[:, INDEX["words"]] >= before[:, INDEX["words"]] + 100).all()
    assert np.allclose(before[:, INDEX["mean_word_length"]], after[:, INDEX["mean_word_length"]])
    assert _reasons(quoting) == [None] * len(quoting)


def test_a_code_block_is_not_english_prose() -> None:
    """A fenced code block in an English document: its tokens count toward the length, but its
    punctuation, `#` comments and short lines are not prose's, so it leaves the share of words
    with a letter and the line rules as the prose has them, and the document is kept."""
    plain, coded = _documents(), _documents(with_code=True)
    assert all("```" in d for d in coded)
    before, after = _signals(plain), _signals(coded)
    for name in ("alpha_words_ratio", "line_punct_ratio", "short_line_ratio", "bullet_lines_ratio"):
        assert np.array_equal(before[:, INDEX[name]], after[:, INDEX[name]]), name
    assert (after[:, INDEX["words"]] > before[:, INDEX["words"]]).all()
    assert (after[:, INDEX["hash_word_ratio"]] <= before[:, INDEX["hash_word_ratio"]]).all()
    assert _reasons(coded) == [None] * len(coded)


def test_a_links_fragment_is_no_symbol() -> None:
    """`#` in a link (`https://...#section`) is not the `#` of symbol-heavy text."""
    page = _english_pages()[0]
    links = "\n".join(
        f"See https://en.wikipedia.org/wiki/Dream_of_the_Red_Chamber#Chapter_{k}." for k in range(12)
    )
    values = _signals([page + "\n\n" + links])
    assert values[0, INDEX["hash_word_ratio"]] == 0


@needs_spacy
def test_a_chinese_page_held_to_english_rules_keeps_datatroves_words() -> None:
    """Han text over half a document's letters, judged by the English table
    (`quality.language=en`, as the agreement with datatrove is measured): one word per Han run,
    as spaCy's English tokenizer cuts it, not jieba's."""
    import spacy

    nlp = spacy.blank("en")
    texts = [
        r["text"]
        for r in _rows("zh_clean.jsonl")[:30]
        if 2 * sum(map(len, HAN_RUN.findall(r["text"]))) > sum(ch.isalpha() for ch in r["text"])
    ]
    assert len(texts) >= 20
    counts = _signals(texts, FilterQuality(language="en"))[:, INDEX["tokens"]]
    assert list(counts) == [len([t for t in nlp(text) if t.text.strip()]) for text in texts]
