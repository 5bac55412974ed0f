"""datatrove's quality filters, run as the `quality` stage's reference (needs the `bench` extra).

English: datatrove's four filters with their defaults (`datatrove_filters`). Other languages:
datatrove's three filters as FineWeb-2 configures them per language (`fineweb2_filters`).

Used by the tests and `benchmarks/bench_quality.py` to measure agreement, never by the stage. Each
filter sees the text as given, in datatrove's order (Gopher repetition, Gopher quality, C4,
FineWeb): the stage runs C4 in filter mode, so C4's line removal is not passed on to FineWeb, and
the reference does the same by giving each filter its own copy of the document.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def datatrove_available() -> bool:
    """Whether datatrove and spaCy import (the `bench` extra is installed)."""
    try:
        import datatrove.pipeline.filters  # noqa: F401
        import spacy  # noqa: F401
    except ImportError:
        return False
    return True


def datatrove_filters(language: str = "en") -> list[Any]:
    """datatrove's GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter and
    FineWebQualityFilter with their default thresholds, in that order."""
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    return [
        GopherRepetitionFilter(language=language),
        GopherQualityFilter(language=language),
        C4QualityFilter(language=language),
        FineWebQualityFilter(language=language),
    ]


def fineweb2_filters(config_name: str) -> list[Any]:
    """datatrove's filters as FineWeb-2's pipeline configures them for one language
    (huggingface/fineweb-2 `fineweb-2-pipeline.py`, step 5): GopherRepetitionFilter with the
    paragraph rules and `dup_line_char_frac` off, FineWebQualityFilter with `short_line_thr` 999
    and `char_duplicates_ratio` 0.1, GopherQualityFilter with `min_stop_words` 2, in that order,
    no C4; thresholds and stop words from the language's config (`config_name`, e.g. `spa_Latn`,
    as FineWeb-2 ships it), words by datatrove's tokenizer for that language."""
    from datatrove.pipeline.filters import FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter

    from dataclean.quality.fineweb2 import configs

    config = configs()[config_name]
    return [
        GopherRepetitionFilter(
            language=config_name,
            dup_para_frac=0,
            dup_line_char_frac=0,
            dup_para_char_frac=0,
            dup_line_frac=config["dup_line_frac"],
            top_n_grams=config["top_n_grams"],
            dup_n_grams=config["dup_n_grams"],
        ),
        FineWebQualityFilter(
            language=config_name,
            short_line_thr=999,
            char_duplicates_ratio=0.1,
            line_punct_thr=config["line_punct_thr"],
            new_line_ratio=config["new_line_ratio"],
        ),
        GopherQualityFilter(
            language=config_name,
            max_avg_word_length=config["max_avg_word_length"],
            min_avg_word_length=config["min_avg_word_length"],
            stop_words=config["stopwords"],
            max_non_alpha_words_ratio=config["max_non_alpha_words_ratio"],
            min_stop_words=2,
        ),
    ]


def datatrove_reasons(texts: Iterable[str], filters: list[Any] | None = None) -> list[str | None]:
    """The first failing filter's reason for each text (None: every filter keeps it)."""
    from datatrove.data import Document

    filters = datatrove_filters() if filters is None else filters
    reasons: list[str | None] = []
    for index, text in enumerate(texts):
        reason = None
        for step in filters:
            verdict = step.filter(Document(text=text, id=str(index)))
            if verdict is not True:
                reason = verdict[1] if isinstance(verdict, tuple) else "filtered"
                break
        reasons.append(reason)
    return reasons
