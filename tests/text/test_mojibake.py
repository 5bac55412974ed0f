"""Mojibake and HTML-entity repair in clean_text, checked against ftfy.fix_text as the reference.

Cases: ftfy's own real-world mojibake and negatives, the Big List of Naughty Strings, and real
multilingual web lines turned into mojibake here through five code pages (tests/fixtures/clean).
Outputs are compared after folding what ftfy.fix_text changes besides the encoding (quote shape,
character width, ligatures, NFC) and after dataclean's removal steps on both sides, so only the
repair is compared.
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections import Counter

import ftfy
import ftfy.bad_codecs  # registers the sloppy-windows-* codecs
import pytest
from ftfy import fixes
from ftfy.badness import BADNESS_RE

from dataclean.stages.clean import CleanText, _classes, clean_text
from dataclean.text import mojibake
from dataclean.text.removal import removal_pass
from tests.conftest import FIXTURE_ROOT

FIXTURES = FIXTURE_ROOT / "clean"
CASES = [json.loads(line) for line in (FIXTURES / "ftfy_cases.jsonl").open(encoding="utf-8")]
LINES = [json.loads(line)["text"] for line in (FIXTURES / "multilingual_lines.jsonl").open(encoding="utf-8")]
CODE_PAGES = ("sloppy-windows-1252", "macroman", "sloppy-windows-1251", "sloppy-windows-1250", "cp437")


def fold(text: str) -> str:
    """What ftfy.fix_text changes besides the encoding, undone on both sides."""
    text = fixes.uncurl_quotes(fixes.fix_character_width(fixes.fix_latin_ligatures(text)))
    return unicodedata.normalize("NFC", text)


def agrees_with_ftfy(text: str) -> bool:
    ours = fold(clean_text(text))
    reference = fold(clean_text(ftfy.fix_text(text), fix_mojibake=False, unescape_html=False))
    return ours == reference


def code_page_cases() -> list[tuple[str, str, str]]:
    """(code page, original line, the line as UTF-8 read in that code page) where they differ."""
    cases = []
    for code_page in CODE_PAGES:
        for line in LINES:
            broken = line.encode("utf-8").decode(code_page)
            if broken != line:
                cases.append((code_page, line, broken))
    return cases


def test_real_world_mojibake_agrees_with_ftfy() -> None:
    positives = [case for case in CASES if case["kind"] == "positive"]
    families = Counter(case["family"] for case in positives)
    assert len(positives) >= 60
    assert {"cp1252", "macroman", "cp1251", "cp1250", "cp437", "html", "layers"} <= set(families)
    agreeing = [case for case in positives if agrees_with_ftfy(case["text"])]
    assert len(agreeing) / len(positives) >= 0.95, [c["label"] for c in positives if c not in agreeing]


def test_mojibake_of_real_lines_through_five_code_pages() -> None:
    cases = code_page_cases()
    assert len(cases) >= 5 * 150
    agree = Counter[str]()
    repaired = Counter[str]()
    ftfy_repaired = Counter[str]()
    for code_page, line, broken in cases:
        expected = clean_text(line, fix_mojibake=False, unescape_html=False)
        ours = clean_text(broken)
        theirs = clean_text(ftfy.fix_text(broken), fix_mojibake=False, unescape_html=False)
        agree[code_page] += fold(ours) == fold(theirs)
        repaired[code_page] += fold(ours) == fold(expected)
        ftfy_repaired[code_page] += fold(theirs) == fold(expected)
    assert sum(agree.values()) / len(cases) >= 0.95
    for code_page in CODE_PAGES:
        total = sum(1 for case in cases if case[0] == code_page)
        assert agree[code_page] / total >= 0.9, code_page
        assert repaired[code_page] >= ftfy_repaired[code_page] - 0.02 * total, code_page


def test_odd_but_correct_text_agrees_with_ftfy() -> None:
    negatives = [case["text"] for case in CASES if case["kind"] == "negative"] + LINES
    assert len(negatives) >= 200
    agreeing = [text for text in negatives if agrees_with_ftfy(text)]
    assert len(agreeing) / len(negatives) >= 0.97
    # The real lines are correct text: nothing in them may change.
    assert all(clean_text(line) == line for line in LINES)


@pytest.mark.parametrize(
    ("broken", "fixed"),
    [
        ("wei√ü", "weiß"),  # MacRoman
        ("Le Vigne di Zam√≤", "Le Vigne di Zamò"),
        ("LiĂ¨ge", "Liège"),  # Windows-1250
        ("NapĂ\u00adĹˇte nĂˇm", "Napíšte nám"),  # the soft hyphen is a byte of í: repair first
        ("UkrsotsbankвЂ™s", "Ukrsotsbank’s"),  # Windows-1251
        ("#╨┐╤Ç╨░╨▓", "#прав"),  # cp437
        ("10Î&frac14;s", "10μs"),  # an HTML entity over mojibake
        ("t‚Äö√†√∂¬¨¬©l‚Äö√†√∂¬¨¬©charger", "télécharger"),  # three layers
    ],
)
def test_issue_examples(broken: str, fixed: str) -> None:
    assert clean_text(broken) == fixed
    assert fold(fixed) == fold(ftfy.fix_text(broken))


def test_only_the_broken_lines_change() -> None:
    text = "Привет, мир — всё хорошо.\ncafÃ© au lait\nŻółw i źdźbło.\n"
    assert clean_text(text) == "Привет, мир — всё хорошо.\ncafé au lait\nŻółw i źdźbło.\n"


def test_html_entities_follow_ftfys_auto_rule() -> None:
    # Unescaped before the first "<" (plain text), kept from the line with "<" on (HTML).
    text = "Fish &amp; chips &eacute;\nmore &lt;\n<p>Tom &amp; Jerry</p>\nend &amp;"
    assert clean_text(text) == "Fish & chips é\nmore <\n<p>Tom &amp; Jerry</p>\nend &amp;"
    assert clean_text(text) == ftfy.fix_text(text)
    assert clean_text("Fish &amp; chips", unescape_html=False) == "Fish &amp; chips"
    assert clean_text("no entity: a & b; AT&T;") == "no entity: a & b; AT&T;"


def test_clean_text_is_returned_as_is() -> None:
    text = "Plain English, “quoted” — and 中文，全角。Ünïcödé, всё, żółw."
    assert mojibake.repair_lines(text) is text


def test_gate_prefilter_never_hides_what_ftfys_detector_flags() -> None:
    # Every pattern of ftfy's detector needs one of the `_needed` characters: strings without
    # them, made of everything else the detector names plus ASCII, never match it.
    needed = mojibake._needed()
    alphabet = [
        char
        for char in mojibake._pattern_chars(BADNESS_RE.pattern) | set("aZ .,?!\n#1")
        if not needed.match(char)
    ]
    rng = random.Random(0)
    for _ in range(3000):
        sample = "".join(rng.choices(alphabet, k=rng.randint(1, 12)))
        assert not BADNESS_RE.search(sample), sample


def test_repair_can_be_turned_off_in_the_stage() -> None:
    import pyarrow as pa

    table = pa.table({"id": ["a"], "text": ["cafÃ© &amp; more"]})
    assert CleanText()(table).column("text").to_pylist() == ["café & more"]
    off = CleanText(fix_mojibake=False, unescape_html=False)(table)
    assert off.column("text").to_pylist() == ["cafÃ© &amp; more"]


def test_batch_pair_flags_equal_the_pair_search() -> None:
    """The compiled pass over a batch's bytes flags exactly the texts in which the regex search
    of `_bad_lines` finds a pair one encoding explains, so skipping the search changes nothing."""
    import pyarrow as pa

    pattern, pairs = mojibake._tables()
    rng = random.Random(0)
    alphabet = sorted({pair[0] for pair in pairs} | {pair[1] for pair in pairs} | set("a .\n中😀"))
    built = ["".join(rng.choices(alphabet, k=rng.randint(0, 8))) for _ in range(3000)]
    texts = [case["text"] for case in CASES] + LINES + [broken for _, _, broken in code_page_cases()] + built
    expected = [
        any(text[m.start() : m.start() + 2] in pairs for m in pattern.finditer(text)) for text in texts
    ]
    assert 0 < sum(expected) < len(texts)
    assert mojibake.mojibake_pair_flags(pa.array(texts, pa.string())).tolist() == expected
    # The clean stage's byte pass finds them in the same pass as its removal steps.
    found = removal_pass(pa.array(texts, pa.string()), _classes(), True)[6]
    assert found.tolist() == expected
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    out = CleanText()(table)
    # A row the stage drops keeps its text as it came in (for excluded/ and the report).
    reasons = out.column("__drop_reason").to_pylist()
    assert out.column("text").to_pylist() == [
        clean_text(text) if reason is None else text for text, reason in zip(texts, reasons, strict=True)
    ]
