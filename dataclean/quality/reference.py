"""datatrove's four quality filters, run as the `quality` stage's reference (needs the `bench` extra).

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
