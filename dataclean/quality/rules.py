"""The quality rules, in datatrove's order, and their thresholds per language.

Each rule compares one statistic of `dataclean.quality.signals` with one threshold, as datatrove's
filter does, and names the drop with datatrove's reason: Gopher repetition (`empty`,
`dup_para_frac`, `dup_para_char_frac`, `dup_line_frac`, `dup_line_char_frac`, `top_{2,3,4}_gram`,
`duplicated_{5..10}_n_grams`), Gopher quality (`gopher_short_doc`, `gopher_long_doc`,
`gopher_below_avg_threshold`, `gopher_above_avg_threshold`, `gopher_too_many_hashes`,
`gopher_too_many_ellipsis`, `gopher_too_many_bullets`, `gopher_too_many_end_ellipsis`,
`gopher_below_alpha_threshold`, `gopher_enough_stop_words`), C4 (`lorem_ipsum`, `curly_bracket`,
`too_few_sentences`), FineWeb (`empty`, `line_punct_ratio`, `short_line_ratio`, `char_dup_ratio`,
`list_ratio`), then the long n-gram run rule (`long_ngram_run`, OLMo's). The first failing rule
is the reason. A threshold of None turns its rule off.

Tables (`dataclean/data/quality/thresholds.json`): `default` (datatrove's English defaults),
per-language overrides (`en`, `zh`), the table of Han text whatever its label, one table per
lid.176 label with a FineWeb-2 config (`dataclean.quality.fineweb2`), and `unconfigured`, the
table of every other label (language-independent rules only).
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from dataclean.errors import ConfigError
from dataclean.quality.chars import TABLES
from dataclean.quality.fineweb2 import fineweb2_tables, style_bits
from dataclean.quality.signals import INDEX, STOP_WORD_MAX_LENGTH
from dataclean.quality.tokenizer import fnv_hash

FAMILIES = ("gopher_repetition", "gopher_quality", "c4", "fineweb", "long_ngram_run")
# Table entries the compiled pass reads (not thresholds): see `dataclean.quality.signals`.
KERNEL_PARAMS = (
    "han_words",
    "c4_min_words_per_line",
    "c4_max_word_length",
    "short_line_length",
    "cjk_punctuation",
    "word_style",
    "code_aware",
    "alpha_over_words",
)
# A table's stop words are bits of one int64 in the compiled pass (FineWeb-2's longest list: 63).
MAX_STOP_WORDS = 63
UNCONFIGURED = "unconfigured"

_LESS: Callable[[Any, Any], Any] = operator.lt
_MORE: Callable[[Any, Any], Any] = operator.gt


@dataclass(frozen=True)
class Rule:
    """Drop with `reason` when `compare(signal, threshold)`; `equals` compares with a constant."""

    reason: str
    family: str
    signal: str
    compare: Callable[[Any, Any], Any]
    threshold: str | None = None
    equals: float | None = None


def _rules() -> tuple[Rule, ...]:
    rep, qual = "gopher_repetition", "gopher_quality"
    rules = [
        Rule("empty", rep, "chars", operator.eq, equals=0),
        *(
            Rule(name, rep, name, _MORE, name)
            for name in ("dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac")
        ),
        *(Rule(f"top_{n}_gram", rep, f"top_{n}_gram", _MORE, f"top_{n}_gram") for n in (2, 3, 4)),
        *(
            Rule(f"duplicated_{n}_n_grams", rep, f"duplicated_{n}_n_grams", _MORE, f"duplicated_{n}_n_grams")
            for n in range(5, 11)
        ),
        Rule("gopher_short_doc", qual, "words", _LESS, "min_doc_words"),
        Rule("gopher_long_doc", qual, "words", _MORE, "max_doc_words"),
        Rule("gopher_below_avg_threshold", qual, "mean_word_length", _LESS, "min_avg_word_length"),
        Rule("gopher_above_avg_threshold", qual, "mean_word_length", _MORE, "max_avg_word_length"),
        Rule("gopher_too_many_hashes", qual, "hash_word_ratio", _MORE, "max_symbol_word_ratio"),
        Rule("gopher_too_many_ellipsis", qual, "ellipsis_word_ratio", _MORE, "max_symbol_word_ratio"),
        Rule("gopher_too_many_bullets", qual, "bullet_lines_ratio", _MORE, "max_bullet_lines_ratio"),
        Rule(
            "gopher_too_many_end_ellipsis",
            qual,
            "end_ellipsis_lines_ratio",
            _MORE,
            "max_ellipsis_lines_ratio",
        ),
        Rule("gopher_below_alpha_threshold", qual, "alpha_words_ratio", _LESS, "max_non_alpha_words_ratio"),
        Rule("gopher_enough_stop_words", qual, "stop_words", _LESS, "min_stop_words"),
        Rule("lorem_ipsum", "c4", "c4_document_drop", operator.eq, equals=1),
        Rule("curly_bracket", "c4", "c4_document_drop", operator.eq, equals=2),
        Rule("too_few_sentences", "c4", "c4_sentences", _LESS, "min_num_sentences"),
        Rule("empty", "fineweb", "nonempty_lines", operator.eq, equals=0),
        Rule("line_punct_ratio", "fineweb", "line_punct_ratio", _LESS, "line_punct_thr"),
        Rule("short_line_ratio", "fineweb", "short_line_ratio", _MORE, "short_line_thr"),
        Rule("char_dup_ratio", "fineweb", "char_dup_ratio", _MORE, "char_duplicates_ratio"),
        Rule("list_ratio", "fineweb", "list_ratio", _MORE, "new_line_ratio"),
        Rule("long_ngram_run", "long_ngram_run", "long_run_fraction", _MORE, "long_run_fraction"),
    ]
    return tuple(rules)


RULES = _rules()
THRESHOLDS = tuple(dict.fromkeys(rule.threshold for rule in RULES if rule.threshold))


@dataclass
class QualityTables:
    """The tables of a run: `names[i]` and its values `values[i]` (table 0 is `default`), the
    table of each language, the table of Han text, and the table of a language without one."""

    names: list[str]
    values: list[dict[str, Any]]
    han_table: int
    by_language: dict[str, int] = field(default_factory=dict)
    unconfigured: int = 0

    def table_of(self, code: str | None) -> int:
        """The table of a row labeled `code` (-1 without a label: chosen by script)."""
        if not code:
            return -1
        return self.by_language.get(code, self.unconfigured)

    def thresholds(self, name: str) -> np.ndarray:
        """Threshold `name` of every table (NaN where the rule is off)."""
        return np.array([math.nan if v[name] is None else float(v[name]) for v in self.values])

    @cached_property
    def _params(self) -> np.ndarray:
        rows = [
            [_kernel_value(v[name]) for name in KERNEL_PARAMS] + [len(v["stop_words"])] for v in self.values
        ]
        return np.array(rows, np.int64)

    @cached_property
    def _stops(self) -> np.ndarray:
        table = np.zeros((len(self.values), MAX_STOP_WORDS), np.uint64)
        for row, values in enumerate(self.values):
            for column, word in enumerate(values["stop_words"]):
                table[row, column] = fnv_hash(word)
        return table

    def params(self) -> np.ndarray:
        """The compiled pass's per-table parameters (`dataclean.quality.signals._signals_kernel`)."""
        return self._params

    def stops(self) -> np.ndarray:
        """FNV hashes of each table's stop words (uint64, one row per table)."""
        return self._stops


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    shipped: dict[str, Any] = json.loads((TABLES / "thresholds.json").read_text(encoding="utf-8"))
    return shipped


def build_tables(overrides: dict[str, Any], per_language: Sequence[str]) -> QualityTables:
    """The shipped tables with `overrides` ({threshold: value}, every table) and `per_language`
    (`zh.top_2_gram=0.3` for one table, `*.top_2_gram=none` for all; `none` turns the rule off)
    applied; raises ConfigError naming a bad entry."""
    shipped = _shipped()
    own = {name: values for name, values in shipped["languages"].items()}
    fineweb2 = {label: t for label, t in fineweb2_tables(shipped["fineweb2"]).items() if label not in own}
    # `unconfigured` last: a user's `thresholds` entry for a new language adds a table after it.
    tables = {**own, **fineweb2, UNCONFIGURED: _entries(shipped[UNCONFIGURED])}
    names = ["default", *tables]
    values = [{**shipped["default"], **tables.get(name, {})} for name in names]
    for table in values:
        table.update({key: value for key, value in overrides.items() if value is not None})
        table.pop("_about", None)
    for entry in per_language:
        key, sep, raw = entry.partition("=")
        lang, dot, name = key.strip().partition(".")
        if (
            not sep
            or not dot
            or name not in values[0]
            or name in ("stop_words", "families_off", "fineweb2_config", *KERNEL_PARAMS)
        ):
            raise ConfigError(
                f"quality.thresholds: {entry!r} is not LANG.THRESHOLD=VALUE with a known threshold"
            )
        if lang != "*" and lang not in names:
            names.append(lang)
            values.append(dict(shipped["default"], **{k: v for k, v in overrides.items() if v is not None}))
        value: float | None = None if raw.strip().lower() in ("none", "null", "") else _number(entry, raw)
        for table in values if lang == "*" else [values[names.index(lang)]]:
            table[name] = value
    for name, table in zip(names, values, strict=True):
        table["word_style"] = style_bits(table["word_style"])
        words = table["stop_words"]
        if len(words) > MAX_STOP_WORDS or any(len(w) > STOP_WORD_MAX_LENGTH for w in words):
            raise ConfigError(
                f"quality table {name!r}: at most {MAX_STOP_WORDS} stop words of at most "
                f"{STOP_WORD_MAX_LENGTH} characters"
            )
    han = names.index(shipped["scripts"]["Han"])
    by_language = {name: i for i, name in enumerate(names) if i}
    return QualityTables(names, values, han, by_language, names.index(UNCONFIGURED))


def _kernel_value(value: Any) -> int:
    """A kernel parameter as the compiled pass reads it: `code_aware` "fenced" is 2 (only ```
    fences are code), true 1 (fences and indented blocks); the rest are numbers or booleans."""
    return 2 if value == "fenced" else int(value)


def _entries(section: dict[str, Any]) -> dict[str, Any]:
    """A table's entries without its `_about` note."""
    return {key: value for key, value in section.items() if not key.startswith("_")}


def _number(entry: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"quality.thresholds: {entry!r}: {raw!r} is not a number") from None


def first_failures(signals: np.ndarray, tables: QualityTables, families: Sequence[str]) -> np.ndarray:
    """The first failing rule's reason per row (None where every rule passes), over the rule
    families named in `families`; each row's thresholds come from its table (`signals[:, table]`)."""
    reasons = np.full(len(signals), None, dtype=object)
    open_rows = np.ones(len(signals), bool)
    table = signals[:, INDEX["table"]].astype(np.int64)
    for rule in RULES:
        if rule.family not in families:
            continue
        # A table may switch a family off for its rows (`"families_off": ["c4"]`).
        off = np.array([rule.family in v.get("families_off", ()) for v in tables.values])[table]
        values = signals[:, INDEX[rule.signal]]
        if rule.threshold is None:
            failing = rule.compare(values, rule.equals)
        else:
            limit = tables.thresholds(rule.threshold)[table]
            with np.errstate(invalid="ignore"):
                failing = rule.compare(values, limit) & ~np.isnan(limit)
            if rule.reason == "line_punct_ratio":
                exclude_zero = np.array([bool(v["line_punct_exclude_zero"]) for v in tables.values])[table]
                failing &= ~(exclude_zero & (values == 0))
        hit = failing & open_rows & ~off
        reasons[hit] = rule.reason
        open_rows &= ~hit
    return reasons
