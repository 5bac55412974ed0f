"""clean_text and the CleanText stage: each character class, mojibake, drops with their reasons."""

from __future__ import annotations

import pyarrow as pa
import pytest
from ftfy.chardata import HTML_ENTITY_RE

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.stages.clean import CleanText, clean_text
from dataclean.text.cleaning import clean_parts


# ESC (0x1B) starts an escape sequence: "\x1bc" is one (RIS), removed whole (tests/stages/test_escapes.py).
@pytest.mark.parametrize(
    "code", [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F]
)
def test_c0_controls_and_delete_removed(code: int) -> None:
    assert clean_text(f"ab{chr(code)}cd") == "abcd"


@pytest.mark.parametrize("code", range(0x80, 0xA0))
def test_c1_controls_never_survive(code: int) -> None:
    # A C1 character in text is almost always Windows-1252 punctuation read as Latin-1: ftfy
    # turns it back into what it meant where it can; whatever is left is removed.
    cleaned = clean_text(f"ab{chr(code)}cd")
    assert not any(0x80 <= ord(ch) < 0xA0 for ch in cleaned)
    assert cleaned.startswith("ab") and cleaned.endswith("cd") and len(cleaned) <= 5


def test_c1_punctuation_is_repaired_not_deleted() -> None:
    assert clean_text("the \x93quoted\x94 word \x96 dash") == "the “quoted” word – dash"


def test_tab_and_newline_kept_and_carriage_returns_become_newlines() -> None:
    assert clean_text("a\tb\nc") == "a\tb\nc"
    assert clean_text("a\r\nb\rc\u2028d") == "a\nb\nc\nd"


def test_replacement_character_from_bad_bytes_removed() -> None:
    assert clean_text("ab\ufffd\ufffdcd") == "abcd"
    assert clean_text(b"ab\xff\xfecd".decode("utf-8", "replace")) == "abcd"


@pytest.mark.parametrize(
    "char", ["\u200b", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u200f", "\u202e", "\u2066"]
)
def test_zero_width_and_bidi_controls_removed(char: str) -> None:
    assert clean_text(f"ab{char}cd") == "abcd"


def test_joiners_kept_inside_scripts_that_need_them() -> None:
    persian = "می\u200cخواهم"
    family = "\U0001f468\u200d\U0001f469"
    assert clean_text(persian) == persian
    assert clean_text(family) == family
    assert clean_text("pass\u200dword") == "password"


@pytest.mark.parametrize(
    "space", ["\u00a0", "\u1680", "\u2000", "\u2005", "\u200a", "\u202f", "\u205f", "\u3000"]
)
def test_exotic_spaces_become_plain_spaces(space: str) -> None:
    assert clean_text(f"a{space}b") == "a b"


@pytest.mark.parametrize(
    ("broken", "fixed"),
    [
        ("cafÃ©", "café"),
        ("Itâ€™s “fine”".replace("“", "â€œ").replace("”", "â€\x9d"), "It’s “fine”"),
        ("ä¸\u00adæ–‡", "中文"),
        ("naÃ¯ve rÃ©sumÃ©", "naïve résumé"),
    ],
)
def test_mojibake_repaired(broken: str, fixed: str) -> None:
    assert clean_text(broken) == fixed


def test_mojibake_repair_can_be_turned_off() -> None:
    assert clean_text("cafÃ©", fix_mojibake=False) == "cafÃ©"


def test_cjk_punctuation_and_full_width_forms_left_alone() -> None:
    text = "他说：「你好！」（全角）《红楼梦》……１２３．ＡＢＣ"
    assert clean_text(text) == text


def test_accented_latin_text_left_alone() -> None:
    text = "Ça été très naïve, Müller, São Paulo, Łódź."
    assert clean_text(text) == text


def test_normalization_is_opt_in() -> None:
    assert clean_text("e\u0301") == "e\u0301"
    assert clean_text("e\u0301", normalization="NFC") == "\u00e9"
    assert clean_text("ＡＢＣ", normalization="NFKC") == "ABC"


def _table(texts: list[str], bad: list[int] | None = None) -> pa.Table:
    ids = [f"r{i}" for i in range(len(texts))]
    return pa.table(
        {
            C.ID: ids,
            C.TEXT: texts,
            C.PARENT_ID: ids,
            C.BAD_BYTES: pa.array(bad or [0] * len(texts), pa.int64()),
        }
    )


def test_stage_drops_with_reasons_and_counts_removed_characters() -> None:
    texts = [
        "A clean sentence.",
        " \u200b\u3000\n\t",
        "\x01\x02\x03\ue000\ue001\ufffdab",
        "Intro. " + "ha" * 80,
        "写得很好" + "的" * 120,
        "a\x00b\u00a0c",
    ]
    out = CleanText()(_table(texts))
    reasons = out.column(C.DROP_REASON).to_pylist()
    # degenerate repetition is the quality stage's long n-gram run rule now
    assert reasons == [None, "empty", "garbage", None, None, None]
    assert out.column(C.TEXT).to_pylist()[5] == "ab c"
    assert out.column(C.REMOVED_CHARS).to_pylist()[5] == 2
    assert C.LANG not in out.column_names  # the `language` stage after clean labels languages


def test_undecodable_bytes_count_as_garbage() -> None:
    out = CleanText()(_table(["short", "short"], bad=[0, 40]))
    assert out.column(C.DROP_REASON).to_pylist() == [None, "garbage"]


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("max_garbage_fraction", {"max_garbage_fraction": 0.0}),
        ("normalization", {"normalization": "NFD"}),
    ],
)
def test_invalid_parameters_name_the_field(field: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=field):
        CleanText(**kwargs)  # type: ignore[arg-type]


def test_stage_byte_pass_matches_clean_text_row_by_row() -> None:
    """The stage does the removal steps on the batch's bytes for rows that need no repair, and
    sends the others through `clean_text`: every row must come out as `clean_text` gives it, with
    the same count of characters changed, and blank rows dropped as empty."""
    texts = [
        "a\r\nb\rc\u2028d\u2029e",
        "\r",
        "\r\n\r\r\n",
        "x\u200by\ufeffz\u00adw\u202ev\u2066",
        "\x0b\x0c\x1c\x7f",
        " \u3000\u00a0\u2000\u202f\u205f\u1680 ",
        "box \u2500 \ue000 \U000f0001 \u2065 ok",
        "日本語\u3000テキスト\r\n",
        "a\u200cb \u200dc",
        "A&amp;b\u00a0c",
        "R&D\u00a0& co; a&b&#x;c &;",
        "<p>a&amp;b\u00a0c",
        "x&#233;" + "y" * 30,
        "&abcdefghijklmnopqrstuvwxy;\u00a0",
        "caf\u00c3\u00a9\r\nnext",
        "\u0085 x",
        "",
        "plain ascii",
        "\u00a0\n\t",
    ]
    out = CleanText()(_table(texts))
    expected = [clean_parts(text, "none", True, True) for text in texts]
    reasons = out.column(C.DROP_REASON).to_pylist()
    # A dropped row keeps its text as it came in (for excluded/ and the report).
    assert out.column(C.TEXT).to_pylist() == [
        new if reason is None else text
        for (new, *_), text, reason in zip(expected, texts, reasons, strict=True)
    ]
    assert out.column(C.REMOVED_CHARS).to_pylist() == [count for _, count, *_ in expected]
    empty = [i for i, (new, *_) in enumerate(expected) if not new or new.isspace()]
    assert [i for i, reason in enumerate(reasons) if reason == "empty"] == empty == [1, 2, 4, 5, 16, 18]
    assert reasons[6] is None and reasons[3] is None


def test_entity_pattern_is_the_one_the_byte_pass_looks_for() -> None:
    """The byte pass (dataclean.text.removal) sends rows with ftfy's HTML entity to ftfy; it reads
    that pattern's shape, so an ftfy that changes it must change the pass too."""
    assert HTML_ENTITY_RE.pattern == "&#?[0-9A-Za-z]{1,24};"
