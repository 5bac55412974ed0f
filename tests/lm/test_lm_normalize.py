"""CCNet normalization: the same characters at training and scoring time."""

from __future__ import annotations

from dataclean.lm.normalize import normalize_lines, normalize_text


def test_lowercase_accents_digits() -> None:
    assert normalize_text("Café NAÏVE Ångström") == "cafe naive angstrom"
    assert normalize_text("In 2024, 3.14 and ٣ and １２") == "in 0000, 0.00 and 0 and 00"


def test_unicode_punctuation_is_mapped_to_ascii() -> None:
    assert normalize_text("你好，世界。“引号”《书名》（括号）！？") == '你好,世界."引号""书名"(括号)!?'
    assert normalize_text("a—b…c–d") == "a - b...c-d"


def test_non_printing_characters_are_removed_and_lines_kept() -> None:
    assert normalize_text("a\x00b\x07c\x9fd\ne") == "abcd\ne"


def test_lines_are_collapsed_and_empty_ones_dropped() -> None:
    text = "  First   line\t here \n\n \u3000 \nSecond\u00a0line\r\n"
    assert normalize_lines(text) == ["first line here", "second line"]
    assert normalize_lines("") == []
    assert normalize_lines("\x00\n \n") == []


def test_ascii_fast_path_matches_the_general_path() -> None:
    text = "Mixed 123 Text\x01 with (punctuation)! And more 9."
    # Adding one non-ASCII character that normalizes to nothing forces the general path.
    assert normalize_text(text) == normalize_text(text + "\u0301")


def test_sentencepiece_space_symbol_cannot_reach_the_tokenizer() -> None:
    assert "▁" not in normalize_text("a▁b é")
