"""Kinds of samples that keep losing: the corpus's groups whose samples' residual loss stays high.

A spike culprit is one bad batch's doing; a persistent outlier is a sample whose loss stays above
its batch-mates' every time it is drawn (`outliers.find_outliers`: the median over its
occurrences of a robust z-score of its batch-relative residual). The advice is to look at the
*kinds* of samples that keep doing that (a source, a site, a perplexity or quality bucket, a
duplicate cluster) and let a person decide, rather than drop clean-but-unusual text silently. So
the samples' scores are joined with the corpus's columns on the id, and every group of every
column (`groups.group_labels`: by what the column is) is compared with the rest *of its own
language* (`lang`; a group that spans languages is compared language by language, as perplexity
buckets are): a language that is harder for the model raises every sample of it, and that is not
a data problem.

- effect: A, the probability that a sample of the group scores above a sample of the rest of its
  language (0.5: no difference), with its 95% confidence interval (`rank_tests.compare`);
- confidence: the one-sided stratified Mann-Whitney test, its p-value adjusted over every group
  tested by Benjamini & Hochberg's false discovery rate;
- shift: how far the group's median score sits above the median of the rest of its language, in
  the scores' own unit (a robust z: spreads of the loss residual), averaged over its languages;
- high: the group's samples above the 0.95 quantile of the rest of their language (5% by chance);
- a group is flagged when it has at least `min_samples` samples, q <= `alpha`, A >= `min_effect`,
  at least `min_share` of its samples are high (one outlier of 240 cannot flag a source) and its
  shift is at least `min_shift` spreads. The shift is what tells a bad source from a clean one
  that is merely harder than another of its language: on the tests' byte-level runs a coupon-code
  spam site sits 1.55-1.64 spreads above the rest of English (A 0.96-0.98), Chinese Wikipedia
  (Latin names, numbers) 0.67-0.84 above a classical Chinese novel (A 0.83-0.89, 34-53% of it
  high). A rank statistic alone cannot tell them apart: both are consistently higher.
  `lang` groups are reported (how much harder a language is) but never flagged.

Groups come from `source`, `lang`, the host of `url`, `ppl_bucket`, `dup_cluster` (clusters only),
every `quality_*` column that can be grouped, and any column the user names. Ranked flagged
first, then by effect size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dataclean import columns as C
from dataclean.feedback.analysis.groups import SOURCE, URL, URL_HOST, group_labels, groupable
from dataclean.feedback.analysis.rank_tests import benjamini_hochberg, compare

DEFAULT_COLUMNS = (SOURCE, C.LANG, URL_HOST, C.PPL_BUCKET, C.DUP_CLUSTER)
__all__ = ["DEFAULT_COLUMNS", "URL", "URL_HOST", "Kind", "kind_columns", "review_kinds"]


@dataclass
class Kind:
    """One group of samples (`column` = `value`) against the rest of its language."""

    column: str
    value: str
    samples: int
    occurrences: int
    outliers: int
    high: int
    shift: float
    median_score: float
    rest_median: float
    effect: float
    effect_low: float
    effect_high: float
    p_value: float
    compared: int  # samples of the group's languages outside the group
    q_value: float = 1.0
    flagged: bool = False
    examples: list[dict[str, Any]] = field(default_factory=list)


def kind_columns(corpus: pa.Schema, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The columns kinds are grouped by: the usual ones, the groupable `quality_*`, `extra`."""
    names = list(DEFAULT_COLUMNS)
    names += [f.name for f in corpus if f.name.startswith("quality_") and groupable(f.type)]
    return names + [c for c in extra if c not in names]


def _high_and_shift(score: np.ndarray, inside: np.ndarray, strata: np.ndarray) -> tuple[int, float]:
    """Samples of the group above the 0.95 quantile of the rest of their stratum, and the group's
    median above the rest's, averaged over strata by the group's samples (NaN: no rest)."""
    high, shift, weight = 0, 0.0, 0
    for label in np.unique(strata[inside]):
        same = strata == label
        rest = score[same & ~inside]
        group = score[same & inside]
        if len(rest):
            high += int((group > np.quantile(rest, 0.95)).sum())
            shift += len(group) * float(np.median(group) - np.median(rest))
            weight += len(group)
    return high, shift / weight if weight else math.nan


def review_kinds(
    verdicts: pa.Table,
    corpus: pa.Table,
    columns: list[str] | None = None,
    min_samples: int = 5,
    alpha: float = 0.01,
    min_effect: float = 0.7,
    min_share: float = 0.25,
    min_shift: float = 1.0,
    examples: int = 3,
) -> list[Kind]:
    """Rank the corpus's groups by how much higher their samples' residual loss is than the
    rest of their language's (see the module docstring). `verdicts`: `find_outliers`' table;
    `corpus`: the rows trained on with `id`, `text`, `lang` and the group columns."""
    names = kind_columns(corpus.schema, columns or [])
    scores = {
        row[C.SAMPLE_ID]: row
        for row in verdicts.select([C.SAMPLE_ID, C.SCORE, "occurrences", "flagged"]).to_pylist()
        if row[C.SCORE] is not None and not math.isnan(row[C.SCORE])
    }
    ids = corpus.column(C.ID).to_pylist()
    trained = np.array([i in scores for i in ids], dtype=bool)
    if trained.sum() < 2 * min_samples:
        return []
    rows = np.flatnonzero(trained)
    score = np.array([scores[ids[r]][C.SCORE] for r in rows], dtype="float64")
    score = np.where(np.isposinf(score), np.finfo("float64").max, score)
    langs = corpus.column(C.LANG).to_pylist() if C.LANG in corpus.column_names else [None] * len(ids)
    strata = np.array([str(langs[r]) for r in rows], dtype=object)
    texts = corpus.column(C.TEXT).to_pylist() if C.TEXT in corpus.column_names else [None] * len(ids)
    found: list[Kind] = []
    for column in names:
        labels = group_labels(corpus, column)
        if labels is None:
            continue
        label = np.array(labels.take(pa.array(rows)).to_pylist(), dtype=object)
        within = None if column == C.LANG else strata  # a language against the others
        for value in sorted({v for v in label if v is not None}):
            inside = label == value
            if inside.sum() < min_samples or inside.all():
                continue
            result = compare(score, inside, within)
            same = np.isin(strata, np.unique(strata[inside])) if within is not None else np.ones_like(inside)
            rest = same & ~inside  # the rest of the group's languages
            members = rows[inside]
            top = members[np.argsort(-score[inside], kind="stable")[:examples]]
            high, shift = _high_and_shift(
                score, inside, strata if within is not None else np.zeros(len(score))
            )
            found.append(
                Kind(
                    column=column,
                    value=str(value),
                    samples=int(inside.sum()),
                    occurrences=int(sum(scores[ids[r]]["occurrences"] or 0 for r in members)),
                    outliers=int(sum(bool(scores[ids[r]]["flagged"]) for r in members)),
                    high=high,
                    shift=shift,
                    median_score=float(np.median(score[inside])),
                    rest_median=float(np.median(score[same & ~inside]))
                    if (same & ~inside).any()
                    else math.nan,
                    effect=result.effect,
                    effect_low=result.low,
                    effect_high=result.high,
                    p_value=result.p_value,
                    compared=int(rest.sum()),
                    examples=[
                        {"sample_id": ids[r], "score": float(scores[ids[r]][C.SCORE]), "text": texts[r]}
                        for r in top
                    ],
                )
            )
    q = benjamini_hochberg(np.array([k.p_value for k in found]))
    for kind, value in zip(found, q, strict=True):
        kind.q_value = float(value)
        kind.flagged = (
            kind.column != C.LANG
            and kind.q_value <= alpha
            and kind.effect >= min_effect
            and kind.high >= min_share * kind.samples
            and kind.shift >= min_shift
        )
    return sorted(found, key=lambda k: (not k.flagged, -k.effect, k.q_value))


def _excerpt(text: str | None, limit: int = 100) -> str:
    flat = " ".join((text or "").split())
    flat = flat if len(flat) <= limit else flat[: limit - 3] + "..."
    return flat.replace("|", "\\|").replace("`", "'")


def kinds_markdown(kinds: list[Kind], shown: int = 15) -> list[str]:
    """The report's section: the groups ranked, flagged ones first, with examples."""
    lines = ["## Kinds of samples that keep losing", ""]
    if not kinds:
        return [*lines, "No group to compare (no corpus given, or too few samples per group).", ""]
    flagged = [k for k in kinds if k.flagged]
    lines += [
        f"{len(flagged)} of {len(kinds)} groups have a residual loss persistently above the rest of "
        "their language's (effect A = P(a sample of the group scores above one of the rest of its "
        "language), with its 95% interval; q: Benjamini-Hochberg adjusted one-sided stratified "
        "Mann-Whitney p; high: samples above the 0.95 quantile of the rest of their language; shift: "
        "the group's median score above the rest of its language's, in spreads; "
        "`lang` groups are shown, never flagged). Take a kind out whole with `dataclean feedback "
        "accept LIST --group COLUMN=VALUE --corpus OUT --as drop`.",
        "",
        "| group | samples | high | outliers | median score (rest) | shift | effect A (95%) | q "
        "| flagged | worst samples |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in kinds[:shown]:
        worst = "; ".join(
            f"{e['sample_id']} ({e['score']:.3g}): {_excerpt(e['text'])}" for e in kind.examples
        )
        lines.append(
            f"| {kind.column}={kind.value} | {kind.samples} | {kind.high} | {kind.outliers} | "
            f"{kind.median_score:.3g} ({kind.rest_median:.3g}) | {kind.shift:.2f} | {kind.effect:.2f} "
            f"({kind.effect_low:.2f}-{kind.effect_high:.2f}) | {kind.q_value:.2g} | "
            f"{'yes' if kind.flagged else ''} | {worst} |"
        )
    return [*lines, ""]


def kinds_records(kinds: list[Kind]) -> list[dict[str, Any]]:
    """The groups as JSON records (kinds.json)."""
    records = []
    for kind in kinds:
        record = {**kind.__dict__}
        record["examples"] = [{**e, "text": _excerpt(e["text"], 300)} for e in kind.examples]
        records.append(record)
    return records
