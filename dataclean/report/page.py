"""Render a `RunReport` as one self-contained HTML page and write it to `OUT/report.html`.

The page opens offline: plotly.js is embedded once in the head (no CDN), each chart is a div and
a call to it. Every string that comes from the data (ids, reasons, texts, paths, config) is
HTML-escaped here, and invisible characters in excerpts are shown as `U+XXXX` marks, since they
are often why a row was dropped.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from dataclean.io.files import atomic_output
from dataclean.io.layout import REPORT
from dataclean.report import charts
from dataclean.report.collect import RunReport, build_report
from dataclean.report.compare import Comparison, Moved
from dataclean.report.excerpts import Excerpt
from dataclean.report.perplexity import BUCKETS, UNBUCKETED

INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC",
       sans-serif; color: #1d2327; margin: 0; background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 12px 24px 48px; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 18px; margin: 0 0 10px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
section { background: #fff; border: 1px solid #dfe3e8; border-radius: 6px; padding: 16px 20px;
          margin: 16px 0; }
.meta { color: #5c6770; margin: 0 0 8px; } .meta code { color: #1d2327; }
nav a { margin-right: 14px; color: #1d6fa5; text-decoration: none; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0 0; }
.card { background: #fff; border: 1px solid #dfe3e8; border-radius: 6px; padding: 8px 14px;
        min-width: 110px; }
.card b { display: block; font-size: 20px; } .card span { color: #5c6770; font-size: 12px; }
.ok { color: #2a7d4f; } .bad { color: #c0392b; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 12px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #e9ecef; padding: 4px 10px; text-align: right; vertical-align: top; }
th { background: #f1f3f5; font-weight: 600; } td.l, th.l { text-align: left; }
.excerpt { white-space: pre-wrap; word-break: break-word; font: 12.5px/1.4 ui-monospace, Menlo,
           Consolas, "Noto Sans Mono CJK SC", monospace; background: #f8f9fa; border-left: 3px solid
           #d62828; padding: 6px 10px; margin: 4px 0 10px; max-height: 9.5em; overflow: auto; }
.excerpt-meta { color: #5c6770; font-size: 12px; } .excerpt-meta code { color: #1d2327; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; } mark { background: #ffe08a; }
.ctl { background: #ffe08a; color: #6a4b00; border-radius: 3px; padding: 0 2px; font-size: 10px; }
.none { color: #8a949c; font-style: italic; }
details pre { max-height: 480px; overflow: auto; background: #f8f9fa; padding: 10px; }
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def excerpt_html(text: str) -> str:
    """`text` escaped, with invisible and control characters shown as marks."""
    parts, last = [], 0
    for match in INVISIBLE.finditer(text):
        parts.append(html.escape(text[last : match.start()]))
        parts.append(f'<span class="ctl">U+{ord(match.group()):04X}</span>')
        last = match.end()
    parts.append(html.escape(text[last:]))
    return "".join(parts)


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else esc(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 1) -> str:
    """A table whose first `left` columns are text (escaped), the rest numbers."""
    head = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="l">{esc(cell)}</td>' if i < left else f"<td>{_number(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(fig: go.Figure) -> str:
    height = fig.layout.height or 360
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            config={"displaylogo": False, "responsive": True},
            default_height=f"{height}px",
        )
    )


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{content}</section>'


def _header(report: RunReport) -> str:
    stats, manifest = report.output.stats, report.output.manifest
    totals = stats.get("totals", {})
    inputs = manifest.get("inputs", [])
    size = sum(int(item.get("size") or 0) for item in inputs)
    holds = totals.get("invariant_holds")
    cards = [
        ("rows in", f"{totals.get('rows_in', 0):,}"),
        ("chunks added", f"{totals.get('rows_added', 0):,}"),
        ("kept", f"{totals.get('kept', 0):,}"),
        ("excluded", f"{totals.get('excluded', 0):,}"),
        ("quarantined", f"{totals.get('quarantined', 0):,}"),
        ("wall seconds", f"{stats.get('seconds', {}).get('wall', 0):,.1f}"),
        ("undecodable bytes", f"{totals.get('undecodable_bytes', 0):,}"),
    ]
    # What stages counted (`with_counts`): escape sequences removed by clean, ...
    for stage in stats.get("stages", []):
        if stage.get("stage") != "read":
            cards.extend(
                (f"{stage['stage']}: {what}", f"{n:,}") for what, n in stage.get("counts", {}).items()
            )
    card_html = "".join(f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for k, v in cards)
    verdict = '<span class="ok">holds</span>' if holds else '<span class="bad">does NOT hold</span>'
    version = manifest.get("dataclean_version", "?")
    meta = (
        f"<code>{esc(report.output.root)}</code> &middot; dataclean {esc(version)}"
        f" &middot; pipeline <code>{esc(manifest.get('config', {}).get('pipeline', '?'))}</code>"
        f" &middot; config <code>{esc(manifest.get('config_hash', '?'))}</code>"
        f" &middot; {len(inputs):,} input files, {size / 1e6:,.1f} MB &middot; {esc(report.generated_at)}"
    )
    invariant = (
        f'<p class="meta">Rows in + chunks added = kept + excluded + quarantined: {verdict} '
        "(per shard and in total).</p>"
    )
    return (
        f'<h1>dataclean run report</h1><p class="meta">{meta}</p>'
        f'<div class="cards">{card_html}</div>{invariant}'
    )


def _funnel(report: RunReport) -> str:
    stages = report.stages
    if not stages:
        return ""
    rows = [
        (
            s["stage"],
            s["rows_in"],
            s["rows_out"],
            s["rows_added"],
            sum(s.get("dropped", {}).values()),
            round(s["bytes_in"] / 1e6, 2),
            round(s["bytes_out"] / 1e6, 2),
            round(s["seconds"], 2),
        )
        for s in stages
    ]
    headers = ("stage", "rows in", "rows out", "chunks added", "dropped", "MB in", "MB out", "seconds")
    charts_html = (
        f'<div class="grid">{figure(charts.funnel_rows(stages))}{figure(charts.funnel_bytes(stages))}</div>'
    )
    return _section("funnel", "Stage funnel", charts_html + table(headers, rows))


def _excerpt(excerpt: Excerpt) -> str:
    text = excerpt.text
    if text is None:
        body = '<span class="none">(no text)</span>'
    elif not text:
        body = '<span class="none">(empty text)</span>'
    else:
        if excerpt.evidence is not None:
            a, b = excerpt.evidence
            body = excerpt_html(text[:a]) + f"<mark>{excerpt_html(text[a:b])}</mark>" + excerpt_html(text[b:])
        else:
            body = excerpt_html(text)
        before = "&hellip; " if excerpt.start > 0 else ""
        after = " &hellip;" if excerpt.length > excerpt.start + len(text) else ""
        body = before + body + after
    shown = len(text or "")
    size = f"{excerpt.length:,} chars" + (
        f", characters {excerpt.start + 1:,}-{excerpt.start + shown:,} shown" if excerpt.truncated else ""
    )
    page = (
        f'<div class="excerpt-meta">id <code>{esc(excerpt.id)}</code> &middot; '
        f"<code>{esc(excerpt.reason)}</code> &middot; {esc(size)}"
    )
    if excerpt.cleaned is None:
        return page + f'</div><div class="excerpt">{body}</div>'
    cleaned = (
        excerpt_html(excerpt.cleaned) if excerpt.cleaned.strip() else '<span class="none">(nothing)</span>'
    )
    return (
        page + '</div><div class="pair"><div><div class="excerpt-meta">as it came in (invisible characters '
        f'as U+ marks)</div><div class="excerpt">{body}</div></div><div><div class="excerpt-meta">'
        f'what cleaning keeps</div><div class="excerpt">{cleaned}</div></div></div>'
    )


def _reasons(report: RunReport) -> str:
    reasons = report.reasons
    if not reasons:
        return _section("reasons", "Drops by reason", '<p class="none">No row was dropped.</p>')
    rows_in = max(int(report.output.stats.get("totals", {}).get("rows_in", 0)), 1)
    parts = [figure(charts.reasons(reasons))]
    parts.append(
        table(
            ("reason", "rows", "% of rows in"),
            [(k, n, round(100 * n / rows_in, 3)) for k, n in reasons.items()],
        )
    )
    parts.append(_reasons_by_language(report))
    for kind, count in reasons.items():
        shown = report.excerpts.get(kind, [])
        parts.append(f"<h3>{esc(kind)} &middot; {count:,} row{'s' if count != 1 else ''}</h3>")
        parts.extend(_excerpt(e) for e in shown)
        if not shown:
            parts.append('<p class="none">No excerpt found in excluded/ or quarantined/.</p>')
    return _section("reasons", "Drops by reason", "".join(parts))


def _reasons_by_language(report: RunReport, most: int = 8) -> str:
    """Rows each reason drops in each of the `most` languages with the most drops."""
    found = report.drops_by_language
    if not found:
        return ""
    totals: dict[str, int] = {}
    for per in found.values():
        for lang, count in per.items():
            totals[lang] = totals.get(lang, 0) + count
    langs = sorted(totals, key=lambda lang: (-totals[lang], lang))[:most]
    rows = [(kind, *(found[kind].get(lang, 0) for lang in langs)) for kind in sorted(found)]
    return "<h3>By language</h3>" + table(("reason", *langs), rows)


def _languages(report: RunReport) -> str:
    summary = report.languages
    if summary is None:
        return ""
    rows = [
        (e.lang, e.kept, round(e.kept_mb, 3), e.dropped, round(e.dropped_mb, 3), e.mean_score or "")
        for e in summary.languages
    ]
    headers = ("language", "kept rows", "kept MB", "dropped rows", "dropped MB", "mean lang_score")
    note = (
        '<p class="meta">Languages as the <code>language</code> stage labeled them (lid.176, or the '
        "input's own <code>lang</code>); <code>(none)</code>: rows dropped before any label."
        + (" Megabytes are estimated from a sample of row groups." if summary.estimated else "")
        + "</p>"
    )
    chart = figure(charts.languages(summary))
    return _section("languages", "Languages", note + chart + table(headers, rows))


def _perplexity(report: RunReport) -> str:
    if report.perplexity is None:
        return ""
    entries = list(report.perplexity.values())
    parts = [figure(charts.perplexity(entry)) for entry in entries]
    kept = [b for b in (*BUCKETS, UNBUCKETED) if any(b in e.kept for e in entries)]
    dropped = list(dict.fromkeys(kind for e in entries for kind in e.dropped))
    headers = (
        "language",
        *(f"kept: {b}" for b in kept),
        *(f"dropped: {k}" for k in dropped),
        "kept, not scored",
    )
    rows = [
        (
            e.lang,
            *(e.kept[b].total if b in e.kept else 0 for b in kept),
            *(e.dropped[k].total if k in e.dropped else 0 for k in dropped),
            e.unscored,
        )
        for e in entries
    ]
    parts.append(table(headers, rows))
    note = (
        '<p class="meta">Bucket edges are drawn at the highest perplexity seen in <code>head</code> '
        "and <code>middle</code>; a threshold at its configured value and at the lowest perplexity "
        "it dropped.</p>"
    )
    return _section("perplexity", "Perplexity by language", note + "".join(parts))


def _lengths(report: RunReport) -> str:
    summary = report.lengths
    if summary is None:
        return ""
    sampled = (
        f" Read on {summary.rows_read:,} of {summary.rows_total:,} kept rows (an even spread of row groups)."
        if summary.rows_read < summary.rows_total
        else ""
    )
    text = (
        f'<p class="meta">{summary.split_documents:,} documents were split into {summary.chunks:,} samples;'
        f" a document's length before splitting is the sum of its kept chunks.{esc(sampled)}</p>"
    )
    return _section("lengths", "Length before and after splitting", text + figure(charts.lengths(summary)))


def _clusters(report: RunReport) -> str:
    summary = report.clusters
    if summary is None:
        return ""
    text = (
        f'<p class="meta">{summary.clusters:,} clusters; {summary.exact:,} rows dropped as exact and '
        f"{summary.near:,} as near duplicates; {summary.kept_with_cluster:,} kept rows carry a "
        "<code>dup_cluster</code>.</p>"
    )
    if not summary.clusters:
        return _section("duplicates", "Duplicate clusters", text)
    grid = figure(charts.cluster_sizes(summary))
    if summary.jaccard.total:
        grid += figure(charts.jaccard(summary.jaccard, summary.threshold))
    largest = table(
        ("kept id", "size", "exact", "near", "members (a few)"),
        [
            (c.kept_id, c.size, c.exact, c.near, ", ".join(summary.members.get(c.kept_id, [])))
            for c in summary.largest
        ],
    )
    alarms = "".join(f'<p class="meta"><b>warning:</b> {esc(line)}</p>' for line in summary.warnings)
    sources = ""
    if summary.source_shares:
        sources = "<h3>Removed per source</h3>" + table(
            ("source", "rows", "removed", "share"),
            [(s["source"], s["rows"], s["removed"], f"{s['share']:.1%}") for s in summary.source_shares],
        )
    return _section(
        "duplicates",
        "Duplicate clusters",
        f'{text}{alarms}<div class="grid">{grid}</div><h3>Largest clusters</h3>{largest}{sources}',
    )


def _contamination(report: RunReport) -> str:
    sets = report.contamination
    if sets is None:
        return ""
    if not sets:
        return _section(
            "contamination",
            "Contamination",
            '<p class="none">No row shares an n-gram with the eval sets.</p>',
        )
    rows = [
        (s.name, s.rows, s.items, s.ngrams, ", ".join(f"{item} ({n})" for item, n in s.top_items))
        for s in sets
    ]
    text = (
        '<p class="meta">Rows sharing n-grams with each eval set (<code>contamination.parquet</code>); '
        "the items found in the most rows, with their row counts.</p>"
    )
    headers = ("eval set", "items in most rows", "rows", "items", "n-grams")
    return _section("contamination", "Contamination", text + table(headers, rows, left=2))


def _moved(title: str, moved: list[Moved]) -> str:
    total = sum(m.count for m in moved)
    rows = [(m.reason, ", ".join(example.id for example in m.examples), m.count) for m in moved]
    content = table(("reason", "example ids", "rows"), rows, left=2) if rows else '<p class="none">None.</p>'
    return f"<h3>{esc(title)}: {total:,}</h3>{content}"


def _compare(comparison: Comparison | None) -> str:
    if comparison is None:
        return ""
    totals = table(
        ("", "earlier run", "this run", "change"), [(n, a, b, b - a) for n, a, b in comparison.totals]
    )
    reasons = table(
        ("reason", "earlier run", "this run", "change"),
        [(n, a, b, b - a) for n, a, b in comparison.reasons if a != b],
    )
    newly = comparison.newly_quarantined
    quarantined = table(
        ("id", "reason"), [(example.id, example.reason) for example in newly.examples], left=2
    )
    more = (
        f'<p class="meta">and {newly.count - len(newly.examples):,} more.</p>'
        if newly.count > len(newly.examples)
        else ""
    )
    parts = [
        f'<p class="meta">Earlier run: <code>{esc(comparison.earlier)}</code></p>',
        totals,
        figure(charts.compared_reasons(comparison)) if comparison.reasons else "",
        "<h3>Reasons whose counts changed</h3>"
        + (reasons if any(a != b for _, a, b in comparison.reasons) else '<p class="none">None.</p>'),
        _moved("Kept in the earlier run, not kept now (by this run's reason)", comparison.lost),
        _moved("Kept now, not kept in the earlier run (by the earlier run's reason)", comparison.gained),
        f"<h3>Newly quarantined ids: {newly.count:,}</h3>"
        + (quarantined + more if newly.count else '<p class="none">None.</p>'),
    ]
    return _section("compare", "Changes since the earlier run", "".join(parts))


def _config(report: RunReport) -> str:
    manifest = json.dumps(report.output.manifest, indent=2, ensure_ascii=False)
    return _section(
        "config",
        "Config and inputs",
        f"<details><summary>manifest.json</summary><pre>{esc(manifest)}</pre></details>",
    )


def render(report: RunReport) -> str:
    """The whole page as one HTML string."""
    sections = [
        ("funnel", "Funnel", _funnel(report)),
        ("reasons", "Drops", _reasons(report)),
        ("languages", "Languages", _languages(report)),
        ("perplexity", "Perplexity", _perplexity(report)),
        ("lengths", "Lengths", _lengths(report)),
        ("duplicates", "Duplicates", _clusters(report)),
        ("contamination", "Contamination", _contamination(report)),
        ("compare", "Changes", _compare(report.comparison)),
        ("config", "Config", _config(report)),
    ]
    nav = "".join(f'<a href="#{anchor}">{esc(label)}</a>' for anchor, label, content in sections if content)
    body = "".join(content for _, _, content in sections)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>dataclean report: {esc(report.output.root)}</title><style>{CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body><main>{_header(report)}<nav>{nav}</nav>{body}</main></body></html>"
    )


def prepare() -> None:
    """Load what a report needs before there is one to write: plotly's figure machinery (loaded
    on first use). The CLI calls this while Ray starts, so the report written at the end of a run
    takes about 0.4 s less (measured on the 1M-document run)."""
    stage = {"stage": "warm", "rows_in": 1, "rows_out": 1, "rows_added": 0}
    figure(charts.funnel_rows([stage]))
    get_plotlyjs()


def write_report(out_dir: str, compare_to: str | None = None) -> str:
    """Write `out_dir/report.html` (atomically) for a finished run; returns its path."""
    page = render(build_report(out_dir, compare_to))
    target = posixpath.join(out_dir.rstrip("/"), REPORT)
    with atomic_output(target) as sink:
        sink.write(page.encode("utf-8"))
    return target
