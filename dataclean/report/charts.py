"""The report's charts as plotly figures, one function per chart, from the report's summaries.

Wide-range values (perplexity, lengths) are drawn on an axis in log10 units with ticks labelled
in plain numbers, so histogram bars keep their true widths. Figures carry no plotly.js: the page
embeds it once (`dataclean.report.page`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dataclean.report.clusters import ClusterSummary
from dataclean.report.compare import Comparison
from dataclean.report.histogram import LinearHistogram, LogHistogram, occupied
from dataclean.report.languages import LanguageSummary
from dataclean.report.lengths import LengthSummary
from dataclean.report.perplexity import BUCKETS, UNBUCKETED, LanguagePerplexity

BUCKET_COLORS = {"head": "#2a9d8f", "middle": "#457b9d", "tail": "#e9a03b", UNBUCKETED: "#adb5bd"}
DROP_COLORS = ("#d62828", "#9d0208", "#f77f00", "#6a040f", "#e85d04")
IN_COLOR, OUT_COLOR, ADDED_COLOR, BEFORE_COLOR = "#8ecae6", "#219ebc", "#ffb703", "#e9a03b"


AXIS = {"gridcolor": "#e9ecef", "zerolinecolor": "#ced4da", "automargin": True}


def _layout(fig: go.Figure, title: str, height: int = 360, **extra: Any) -> go.Figure:
    """Title, size and a light style set directly (a named template would add ~7 KB per chart)."""
    fig.update_layout(
        title={"text": title, "x": 0.01, "y": 0.98, "yanchor": "top", "font": {"size": 15}},
        template="none",
        font={"family": "system-ui, sans-serif", "size": 12, "color": "#1d2327"},
        plot_bgcolor="white",
        paper_bgcolor="white",
        xaxis=AXIS,
        yaxis=AXIS,
        height=height,
        margin={"l": 60, "r": 20, "t": 76, "b": 50},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.01, "yanchor": "bottom"},
        **extra,
    )
    return fig


def human(value: float) -> str:
    """1234 -> '1.2k', 2_000_000 -> '2M', 0.5 -> '0.5'."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _log_ticks(fig: go.Figure, low: float, high: float) -> None:
    """Ticks at 1, 2, 5 x 10^k between the log10 positions `low` and `high`."""
    values = [
        math.log10(m * 10**k)
        for k in range(math.floor(low), math.ceil(high) + 1)
        for m in (1, 2, 5)
        if low - 0.01 <= math.log10(m * 10**k) <= high + 0.01
    ]
    fig.update_xaxes(tickvals=values, ticktext=[human(10**v) for v in values])


def _log_bars(histogram: LogHistogram, window: slice, name: str, color: str, unit: str) -> go.Bar:
    edges = histogram.log_edges
    low, high = edges[window.start : window.stop], edges[window.start + 1 : window.stop + 1]
    text = [f"{human(10**a)}-{human(10**b)} {unit}" for a, b in zip(low, high, strict=True)]
    return go.Bar(
        x=(low + high) / 2,
        y=histogram.counts[window],
        width=histogram.step,
        name=name,
        marker_color=color,
        hovertext=text,
        hovertemplate="%{hovertext}: %{y} rows<extra>" + name + "</extra>",
    )


def funnel_rows(stages: Sequence[dict[str, Any]]) -> go.Figure:
    """Rows into and out of each stage (and chunks added by splitting)."""
    names = [s["stage"] for s in stages]
    fig = go.Figure(
        [
            go.Bar(x=names, y=[s["rows_in"] for s in stages], name="rows in", marker_color=IN_COLOR),
            go.Bar(x=names, y=[s["rows_out"] for s in stages], name="rows out", marker_color=OUT_COLOR),
        ]
    )
    if any(s["rows_added"] for s in stages):
        fig.add_bar(
            x=names, y=[s["rows_added"] for s in stages], name="chunks added", marker_color=ADDED_COLOR
        )
    return _layout(fig, "Rows per stage", barmode="group", yaxis_title="rows")


def funnel_bytes(stages: Sequence[dict[str, Any]]) -> go.Figure:
    """Text bytes into and out of each stage (the read stage has only its output)."""
    names = [s["stage"] for s in stages]
    fig = go.Figure(
        [
            go.Bar(x=names, y=[s["bytes_in"] / 1e6 for s in stages], name="MB in", marker_color=IN_COLOR),
            go.Bar(x=names, y=[s["bytes_out"] / 1e6 for s in stages], name="MB out", marker_color=OUT_COLOR),
        ]
    )
    return _layout(fig, "Text MB per stage", barmode="group", yaxis_title="MB of UTF-8 text")


def reasons(counts: dict[str, int]) -> go.Figure:
    """Dropped rows per reason, largest first, one color per stage."""
    items = sorted(counts.items(), key=lambda kv: kv[1])
    stages = list(dict.fromkeys(kind.split(":", 1)[0] for kind, _ in reversed(items)))
    fig = go.Figure()
    for number, stage in enumerate(stages):
        mine = [(kind, n) for kind, n in items if kind.split(":", 1)[0] == stage]
        fig.add_bar(
            y=[kind for kind, _ in mine],
            x=[n for _, n in mine],
            orientation="h",
            name=stage,
            marker_color=DROP_COLORS[number % len(DROP_COLORS)],
        )
    height = max(200, 90 + 28 * len(items))
    fig.update_yaxes(categoryorder="array", categoryarray=[kind for kind, _ in items])
    return _layout(fig, "Dropped rows by reason", height, xaxis_title="rows", showlegend=len(stages) > 1)


def perplexity(entry: LanguagePerplexity) -> go.Figure:
    """One language: kept rows stacked by bucket, dropped rows by reason, cut points as lines."""
    kept = [(b, entry.kept[b]) for b in (*BUCKETS, UNBUCKETED) if b in entry.kept]
    kept += [(b, h) for b, h in entry.kept.items() if b not in (*BUCKETS, UNBUCKETED)]
    dropped = list(entry.dropped.items())
    window = occupied([h.counts for _, h in kept + dropped])
    fig = go.Figure()
    for bucket, histogram in kept:
        fig.add_trace(
            _log_bars(histogram, window, f"kept: {bucket}", BUCKET_COLORS.get(bucket, "#adb5bd"), "ppl")
        )
    for number, (kind, histogram) in enumerate(dropped):
        fig.add_trace(
            _log_bars(histogram, window, f"dropped: {kind}", DROP_COLORS[number % len(DROP_COLORS)], "ppl")
        )
    edges = (kept + dropped)[0][1]
    low, high = edges.log_edges[window.start], edges.log_edges[window.stop]
    for label, value in entry.cut_points():
        at = math.log10(max(value, 1e-9))
        low, high = min(low, at - 0.05), max(high, at + 0.05)
        fig.add_vline(
            x=at,
            line_dash="dash",
            line_color="#333",
            annotation_text=f"{label} {human(value)}",
            annotation_textangle=-90,
            annotation_position="top left",
            annotation_font_size=11,
            annotation_bgcolor="rgba(255,255,255,0.75)",
        )
    _log_ticks(fig, low, high)
    title = f"Perplexity, {entry.lang}" + (
        f" ({entry.unscored:,} kept rows not scored)" if entry.unscored else ""
    )
    fig.update_xaxes(range=[low, high])
    return _layout(
        fig,
        title,
        380,
        barmode="stack",
        bargap=0,
        xaxis_title="perplexity",
        yaxis_title="rows",
        legend_traceorder="normal",
    )


def lengths(summary: LengthSummary) -> go.Figure:
    """Kept document lengths before splitting against sample lengths after, overlaid."""
    window = occupied([summary.documents.counts, summary.samples.counts])
    fig = go.Figure(
        [
            _log_bars(summary.documents, window, "documents (before splitting)", BEFORE_COLOR, "chars"),
            _log_bars(summary.samples, window, "samples (after splitting)", OUT_COLOR, "chars"),
        ]
    )
    fig.update_traces(opacity=0.65)
    if summary.budget:
        fig.add_vline(
            x=math.log10(summary.budget),
            line_dash="dash",
            annotation_text=f"budget {human(summary.budget)} chars",
            annotation_position="top left",
        )
    edges = summary.documents.log_edges
    if window.stop > window.start:
        _log_ticks(fig, edges[window.start], edges[window.stop])
    return _layout(
        fig,
        "Length in characters",
        360,
        barmode="overlay",
        bargap=0,
        xaxis_title="characters",
        yaxis_title="rows",
    )


def cluster_sizes(summary: ClusterSummary) -> go.Figure:
    """How many duplicate clusters have each size (kept row + its dropped duplicates)."""
    sizes = list(summary.sizes)
    counts = [summary.sizes[s] for s in sizes]
    fig = go.Figure(go.Bar(x=[str(s) for s in sizes], y=counts, marker_color=OUT_COLOR, name="clusters"))
    log = bool(counts) and max(counts) > 50 * max(min(counts), 1)
    fig.update_yaxes(type="log" if log else "linear")
    fig.update_xaxes(type="category")
    return _layout(
        fig, "Duplicate clusters by size", 320, xaxis_title="rows in the cluster", yaxis_title="clusters"
    )


def jaccard(histogram: LinearHistogram, threshold: float | None) -> go.Figure:
    """Similarity of each dropped near duplicate to the row it duplicates."""
    edges = histogram.edges
    fig = go.Figure(
        go.Bar(
            x=(edges[:-1] + edges[1:]) / 2,
            y=histogram.counts,
            width=np.diff(edges),
            marker_color=DROP_COLORS[0],
            name="near duplicates",
        )
    )
    if threshold is not None:
        fig.add_vline(x=threshold, line_dash="dash", annotation_text=f"threshold {threshold:g}")
    filled = np.flatnonzero(histogram.counts)
    starts = [float(edges[filled[0]])] if len(filled) else []
    low = min([*starts, *([threshold] if threshold is not None else [])], default=histogram.low)
    fig.update_xaxes(range=[max(histogram.low, math.floor(low * 20) / 20 - 0.05), histogram.high])
    return _layout(
        fig,
        "Near duplicates by Jaccard similarity",
        320,
        xaxis_title="Jaccard similarity",
        yaxis_title="rows",
    )


def compared_reasons(comparison: Comparison) -> go.Figure:
    """Dropped rows per reason in the earlier run and in this one."""
    items = [row for row in comparison.reasons if row[1] or row[2]]
    names = [name for name, _, _ in items]
    fig = go.Figure(
        [
            go.Bar(x=names, y=[before for _, before, _ in items], name="earlier run", marker_color=IN_COLOR),
            go.Bar(x=names, y=[now for _, _, now in items], name="this run", marker_color=OUT_COLOR),
        ]
    )
    return _layout(
        fig, "Dropped rows by reason: earlier run and this run", 340, barmode="group", yaxis_title="rows"
    )


def languages(summary: LanguageSummary, most: int = 30) -> go.Figure:
    """Kept and dropped megabytes of the `most` largest languages."""
    shown = summary.languages[:most]
    names = [e.lang for e in shown]
    fig = go.Figure(
        [
            go.Bar(name="kept", x=names, y=[e.kept_mb for e in shown], marker_color=OUT_COLOR),
            go.Bar(name="dropped", x=names, y=[e.dropped_mb for e in shown], marker_color=DROP_COLORS[0]),
        ]
    )
    fig.update_layout(barmode="stack", yaxis_title="MB of text")
    return _layout(fig, f"Text per language (the {len(shown)} largest)")
