"""Kinds of samples that keep losing: the corpus's groups whose samples' residual loss stays high.

A spike culprit is one bad batch's doing; a persistent outlier is a sample whose loss stays above
its batch-mates' every time it is drawn (`outliers.find_outliers`: the median over its
occurrences of a robust z-score of its batch-relative residual). The advice is to look at the
*kinds* of samples that keep doing that (a source, a language, a site, a perplexity or quality
bucket, a duplicate cluster) and let a person decide, rather than drop clean-but-unusual text
(code, URLs, tables, another language) silently. So the samples' scores are joined with the
corpus's columns on the id, and every group of every column is compared with the rest:

- effect size: the probability that a sample of the group has a higher score than a sample of
  the rest (Vargha & Delaney's A, i.e. the common-language effect size; 0.5 is no difference);
- confidence: the one-sided Mann-Whitney U test of the group against the rest (normal
  approximation with the tie correction, as `scipy.stats.mannwhitneyu(method="asymptotic")`),
  its p-value adjusted over every group tested by Benjamini & Hochberg's false discovery rate;
- a group is flagged when it has at least `min_samples` samples, q <= `alpha` and A >= `min_effect`.

Groups come from `source`, `lang`, the host of `url`, `ppl_bucket`, `dup_cluster` (clusters only),
the `quality_*` classifier probabilities in fifths (0.0-0.2, ..., 0.8-1.0), and any column the
user names (numbers in quintiles of their values). Ranked flagged first, then by effect size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean import columns as C

# Input columns a corpus often carries through dataclean (not produced by any stage), and the group
# derived from `url`.
SOURCE = "source"
URL = "url"
URL_HOST = "url_host"
DEFAULT_COLUMNS = (SOURCE, C.LANG, URL_HOST, C.PPL_BUCKET, C.DUP_CLUSTER)
_HOST = r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(?P<host>[^/:?#]+)"


@dataclass
class Kind:
    """One group of samples (`column` = `value`) against the rest of the samples trained on."""

    column: str
    value: str
    samples: int
    occurrences: int
    outliers: int
    median_score: float
    rest_median: float
    effect: float
    p_value: float
    q_value: float = 1.0
    flagged: bool = False
    examples: list[dict[str, Any]] = field(default_factory=list)


def _ranks(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Average ranks (1-based) of `values` and the tie term sum(t^3 - t)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    average = ends - (counts - 1) / 2.0
    return average[inverse], float((counts.astype("float64") ** 3 - counts).sum())


def mann_whitney_greater(ranks: np.ndarray, inside: np.ndarray, tie_term: float) -> tuple[float, float]:
    """(A, one-sided p) of the samples `inside` scoring higher than the others, from the ranks of
    all samples: U = R1 - n1(n1+1)/2, A = U / (n1 n2), z with the tie-corrected variance."""
    n1 = int(inside.sum())
    n = len(ranks)
    n2 = n - n1
    if n1 == 0 or n2 == 0:
        return 0.5, 1.0
    u = float(ranks[inside].sum()) - n1 * (n1 + 1) / 2.0
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:
        return u / (n1 * n2), 1.0
    z = (u - n1 * n2 / 2.0 - 0.5) / math.sqrt(variance)  # continuity-corrected, as scipy's default
    return u / (n1 * n2), 0.5 * math.erfc(z / math.sqrt(2.0))


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input's order."""
    m = len(p_values)
    if m == 0:
        return p_values
    order = np.argsort(p_values)
    scaled = p_values[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(adjusted, 1.0)
    return q


def group_labels(corpus: pa.Table, column: str, bins: int = 5) -> pa.Array | None:
    """The group of every corpus row for one column (null: in no group), or None if absent."""
    if column == URL_HOST:
        if URL not in corpus.column_names:
            return None
        found = pc.extract_regex(corpus.column(URL).cast(pa.string()), _HOST)
        return pc.utf8_lower(pc.struct_field(found, "host")).combine_chunks()
    if column not in corpus.column_names:
        return None
    values = corpus.column(column).combine_chunks()
    if pa.types.is_floating(values.type) or pa.types.is_integer(values.type):
        numbers = pc.fill_null(values.cast(pa.float64()), math.nan).to_numpy(zero_copy_only=False)
        finite = np.isfinite(numbers)
        if column.startswith("quality_"):  # classifier probabilities: fifths of [0, 1]
            edges = np.linspace(0.0, 1.0, bins + 1)
        elif finite.any():
            edges = np.unique(np.quantile(numbers[finite], np.linspace(0, 1, bins + 1)))
        else:
            return pa.nulls(len(values), pa.string())
        index = np.clip(np.searchsorted(edges, numbers, side="right") - 1, 0, max(len(edges) - 2, 0))
        labels = [f"{edges[i]:.3g}-{edges[min(i + 1, len(edges) - 1)]:.3g}" for i in range(len(edges))]
        return pa.array([labels[i] if ok else None for i, ok in zip(index, finite, strict=True)], pa.string())
    return values.cast(pa.string())


def review_kinds(
    verdicts: pa.Table,
    corpus: pa.Table,
    columns: list[str] | None = None,
    min_samples: int = 5,
    alpha: float = 0.01,
    min_effect: float = 0.7,
    examples: int = 3,
) -> list[Kind]:
    """Rank the corpus's groups by how much higher their samples' residual loss is than the
    rest's (see the module docstring). `verdicts`: `find_outliers`' table; `corpus`: the rows
    trained on with `id`, `text` and the group columns."""
    names = list(DEFAULT_COLUMNS) + [c for c in corpus.column_names if c.startswith("quality_")]
    names += [c for c in columns or [] if c not in names]
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
    ranks, ties = _ranks(score)
    texts = corpus.column(C.TEXT).to_pylist() if C.TEXT in corpus.column_names else [None] * len(ids)
    found: list[Kind] = []
    for column in names:
        labels = group_labels(corpus, column)
        if labels is None:
            continue
        label = np.array(labels.take(pa.array(rows)).to_pylist(), dtype=object)
        for value in sorted({v for v in label if v is not None}):
            inside = label == value
            if inside.sum() < min_samples or inside.all():
                continue
            effect, p = mann_whitney_greater(ranks, inside, ties)
            members = rows[inside]
            top = members[np.argsort(-score[inside], kind="stable")[:examples]]
            found.append(
                Kind(
                    column=column,
                    value=str(value),
                    samples=int(inside.sum()),
                    occurrences=int(sum(scores[ids[r]]["occurrences"] or 0 for r in members)),
                    outliers=int(sum(bool(scores[ids[r]]["flagged"]) for r in members)),
                    median_score=float(np.median(score[inside])),
                    rest_median=float(np.median(score[~inside])),
                    effect=effect,
                    p_value=p,
                    examples=[
                        {"sample_id": ids[r], "score": float(scores[ids[r]][C.SCORE]), "text": texts[r]}
                        for r in top
                    ],
                )
            )
    q = benjamini_hochberg(np.array([k.p_value for k in found]))
    for kind, value in zip(found, q, strict=True):
        kind.q_value = float(value)
        kind.flagged = kind.q_value <= alpha and kind.effect >= min_effect
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
        f"{len(flagged)} of {len(kinds)} groups have a residual loss persistently above the rest's "
        "(effect A = P(a sample of the group scores above one of the rest); q: Benjamini-Hochberg "
        "adjusted one-sided Mann-Whitney p). Their outliers are listed with action `review`: accept "
        "them with `dataclean feedback accept LIST --group COLUMN=VALUE --corpus OUT`.",
        "",
        "| group | samples | outliers | median score (rest) | effect A | q | flagged | worst samples |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in kinds[:shown]:
        worst = "; ".join(
            f"{e['sample_id']} ({e['score']:.3g}): {_excerpt(e['text'])}" for e in kind.examples
        )
        lines.append(
            f"| {kind.column}={kind.value} | {kind.samples} | {kind.outliers} | "
            f"{kind.median_score:.3g} ({kind.rest_median:.3g}) | {kind.effect:.2f} | {kind.q_value:.2g} | "
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
