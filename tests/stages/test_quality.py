"""The quality stage: datatrove's decisions on real pages, the Chinese rules, parameters, a run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.quality import planted
from dataclean.quality.reference import datatrove_available, datatrove_reasons
from dataclean.quality.tokenizer import words
from dataclean.run.config import configure
from dataclean.stages.quality import FilterQuality
from tests.conftest import FIXTURE_ROOT, read_rows, write_jsonl

FIXTURES = FIXTURE_ROOT / "quality"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]


def _reasons(stage: FilterQuality, texts: list[str], langs: list[str] | None = None) -> list[str | None]:
    table = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts})
    if langs is not None:
        table = table.append_column(C.LANG, pa.array(langs, pa.string()))
    out = stage(table)
    return out.column(C.DROP_REASON).to_pylist()


def _agreement(ours: list[str | None], theirs: list[str | None]) -> tuple[float, float]:
    same = np.mean([(a is None) == (b is None) for a, b in zip(ours, theirs, strict=True)])
    both = [(a, b) for a, b in zip(ours, theirs, strict=True) if a is not None and b is not None]
    return float(same), float(np.mean([a == b for a, b in both])) if both else 1.0


@pytest.mark.parametrize("fixture", ["cc_pages.jsonl", "english_trips.jsonl"])
def test_decisions_match_the_recorded_datatrove_ones(fixture: str) -> None:
    rows = _rows(fixture)
    ours = _reasons(FilterQuality(language="en"), [r["text"] for r in rows])
    keep_drop, first_reason = _agreement(ours, [r["datatrove"] for r in rows])
    assert keep_drop >= 0.99 and first_reason >= 0.95, (keep_drop, first_reason)


def test_every_trip_trips_the_rule_it_was_built_for() -> None:
    rows = _rows("english_trips.jsonl")
    assert _reasons(FilterQuality(language="en"), [r["text"] for r in rows]) == [r["built_for"] for r in rows]


@pytest.mark.skipif(
    not datatrove_available(), reason="datatrove and spaCy (the bench extra) are not installed"
)
def test_decisions_match_datatrove_run_now() -> None:
    texts = [r["text"] for name in ("cc_pages.jsonl", "english_trips.jsonl") for r in _rows(name)]
    keep_drop, first_reason = _agreement(
        _reasons(FilterQuality(language="en"), texts), datatrove_reasons(texts)
    )
    assert keep_drop >= 0.99 and first_reason >= 0.95, (keep_drop, first_reason)


@pytest.mark.skipif(not datatrove_available(), reason="spaCy (the bench extra) is not installed")
def test_words_are_spacys() -> None:
    import spacy

    nlp = spacy.blank("en")
    texts = [r["text"] for r in _rows("cc_pages.jsonl")]
    same = [words(t) == [tok.text.strip() for tok in nlp(t) if tok.text.strip()] for t in texts]
    assert np.mean(same) >= 0.98


def test_tokenizer_cases() -> None:
    assert words("Don't stop (e.g. now), Mr. Smith's 10km run... at http://x.com/a-b!") == [
        "Do",
        "n't",
        "stop",
        "(",
        "e.g.",
        "now",
        ")",
        ",",
        "Mr.",
        "Smith",
        "'s",
        "10",
        "km",
        "run",
        "...",
        "at",
        "http://x.com/a-b",
        "!",
    ]
    assert words("中文，English。", han=True) == ["中", "文", "，", "English", "。"]


def test_chinese_clean_is_kept_and_planted_junk_dropped() -> None:
    rows = _rows("zh_clean.jsonl")
    clean = [r["text"] for r in rows]
    stage = FilterQuality()
    dropped = [r for r in _reasons(stage, clean, ["zh"] * len(clean)) if r]
    assert len(dropped) <= 0.02 * len(clean), dropped
    junk = planted.chinese_junk(clean, random.Random(0), 40)
    for kind, texts in junk.items():
        # labels are not trusted with Han text: `ja` and `en` rows get the Han rules too
        for lang in ("zh", "ja", "en"):
            caught = np.mean([r is not None for r in _reasons(stage, texts, [lang] * len(texts))])
            assert caught >= 0.9, (kind, lang, caught)


def test_a_closing_quote_after_a_sentence_end_is_punctuation() -> None:
    line = "他说：“我们明天再去那个地方看一看吧，好不好呀！”"
    text = "\n".join([line] * 1 + [line.replace("好不好", f"第{i}次") for i in range(12)])
    values, _ = FilterQuality().signals(pa.table({C.TEXT: [text], C.LANG: ["zh"]}))
    from dataclean.quality.signals import INDEX

    assert values[0, INDEX["line_punct_ratio"]] == 1.0


def test_annotate_mode_adds_the_signals_and_drops_nothing() -> None:
    rows = _rows("cc_pages.jsonl")[:10]
    stage = FilterQuality(mode="annotate", language="en")
    assert stage.provided_columns() == (C.QUALITY_SIGNALS, C.QUALITY_UNCONFIGURED)
    out = stage(pa.table({C.ID: [str(i) for i in range(10)], C.TEXT: [r["text"] for r in rows]}))
    assert C.DROP_REASON not in out.column_names
    signals = out.column(C.QUALITY_SIGNALS).to_pylist()
    assert {"dup_line_frac", "top_2_gram", "stop_words", "line_punct_ratio"} <= set(signals[0])
    assert all(s["chars"] == len(r["text"]) for s, r in zip(signals, rows, strict=True))


def test_thresholds_families_and_errors_from_the_command_line() -> None:
    trip = {r["built_for"]: r["text"] for r in _rows("english_trips.jsonl")}
    stage = FilterQuality(language="en")
    assert _reasons(stage, [trip["top_2_gram"]]) == ["top_2_gram"]
    loose = configure(stage, {"top_2_gram": "0.9", "top_3_gram": "0.9", "top_4_gram": "0.9"})
    assert _reasons(loose, [trip["top_2_gram"]]) != ["top_2_gram"]
    off = configure(stage, {"gopher_repetition": "off", "gopher_quality": "off", "c4": "off"})
    assert _reasons(off, [trip["lorem_ipsum"]]) == [None]
    per_language = configure(FilterQuality(), {"thresholds": "en.min_doc_words=10"})
    assert _reasons(per_language, [trip["gopher_short_doc"]], ["en"]) != ["gopher_short_doc"]
    assert _reasons(per_language, [trip["gopher_short_doc"]], ["de"]) == ["gopher_short_doc"]
    with pytest.raises(ConfigError, match=r"quality\.thresholds"):
        configure(stage, {"thresholds": "en.no_such_rule=1"})
    with pytest.raises(ConfigError, match=r"quality\.language"):
        FilterQuality(language="xx")


def test_default_recipe_keeps_clean_chinese_and_english(tmp_path: Path) -> None:
    from dataclean.executors.local import LocalExecutor
    from dataclean.run import run_pipeline
    from pipelines.default import build

    english = [r["text"] for r in _rows("cc_pages.jsonl") if r["datatrove"] is None][:6]
    chinese = [r["text"] for r in _rows("zh_clean.jsonl")][:6]
    junk = [planted.repeated_sentence(chinese[0] * 2, random.Random(1))]
    texts = english + chinese + junk
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    run_pipeline([str(source)], str(tmp_path / "out"), build(), LocalExecutor())
    kept = {row["id"] for row in read_rows(tmp_path / "out" / "data")}
    excluded = {row["id"]: row["reason"] for row in read_rows(tmp_path / "out" / "excluded")}
    kept_parents = {i.split("#")[0] for i in kept}
    assert sum(f"d{i}" in kept_parents for i in range(6)) >= 5
    assert sum(f"d{i}" in kept_parents for i in range(6, 12)) >= 5
    assert excluded.get(f"d{len(texts) - 1}", "").startswith("quality:")


def _runs_only() -> FilterQuality:
    return FilterQuality(gopher_repetition=False, gopher_quality=False, c4=False, fineweb=False)


def test_long_ngram_runs_are_cut_back_or_dropped() -> None:
    good = next(r["text"] for r in _rows("cc_pages.jsonl") if r["datatrove"] is None)
    chinese = _rows("zh_clean.jsonl")[0]["text"]
    texts = [
        good + " " + "ha" * 60 + " end.",  # inside a word
        good + "\n" + "buy now " * 40,  # words
        chinese + "的" * 50 + "。",  # Han characters
        "x " + "ab" * 200,  # mostly repetition
        good + "\n" + "-" * 300 + "\n" + "=" * 200,  # separator lines are layout
    ]
    table = pa.table(
        {C.ID: [str(i) for i in range(5)], C.TEXT: texts, C.LANG: ["en", "en", "zh", "en", "en"]}
    )
    out = _runs_only()(table)
    assert out.column(C.DROP_REASON).to_pylist() == [None, None, None, "long_ngram_run", None]
    assert out.column(C.QUALITY_RUNS_CUT).to_pylist() == [1, 1, 1, 0, 0]
    cut = out.column(C.TEXT).to_pylist()
    assert cut[0] == good + " " + "hahaha end."
    assert cut[1] == good + "\n" + "buy now buy now buy now "
    assert cut[2] == chinese + "的的的。"
    assert cut[4] == texts[4]
    annotated = FilterQuality(mode="annotate")(table)
    assert annotated.column(C.TEXT).to_pylist() == texts  # annotate mode changes nothing
    fractions = [s["long_run_fraction"] for s in annotated.column(C.QUALITY_SIGNALS).to_pylist()]
    assert fractions[3] > 0.5 and fractions[4] == 0.0
