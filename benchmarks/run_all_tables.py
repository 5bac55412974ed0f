"""run_all's printed tables: one row per speed comparison, and both tools' dedup decisions against
the truth. Formatting only: the figures come from run_all's report."""

from __future__ import annotations

from typing import Any

from benchmarks.measure import Measurement


def _number(value: float, digits: int = 3) -> str:
    if value >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _memory(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


HEADER = (
    "step",
    "input",
    "dataclean",
    "MB/s/core",
    "docs/s/core",
    "peak MB",
    "reference",
    "MB/s/core",
    "docs/s/core",
    "peak MB",
    "dataclean / reference, median (min-max)",
)


def _ratio(value: float) -> str:
    return f"{value:.0f}x" if value >= 20 else f"{value:.1f}x" if value >= 2 else f"{value:.2f}x"


def _ratio_cell(row: dict[str, Any]) -> str:
    cell = f"**{_ratio(row['ratio'])}**"
    if "ratio_min" in row and row["ratio_min"] != row["ratio_max"]:
        cell += f" ({_ratio(row['ratio_min'])}-{_ratio(row['ratio_max'])})"
    return cell


def quality_table(qualities: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Both tools' dedup decisions against reference_dedup, one line per tool and run."""
    header = (
        "run",
        "tool",
        "pairs at J >= 0.7 (truth)",
        "rows dropped",
        "duplicate pairs left in the output",
        "rows dropped with no kept row at J >= 0.7",
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for run, quality in qualities.items():
        for tool, found in quality.items():
            cells = [
                run,
                tool,
                f"{found['true_pairs']:,}",
                f"{found['dropped']:,}",
                f"{found['pairs_left']:,} ({found['pairs_left_share']:.2%})",
                f"{found['false_drops']:,} ({found['false_drop_share']:.2%} of dropped)",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table: one row per comparison (speed per core)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows:
        ours, theirs = Measurement(**row["dataclean"]), Measurement(**row["reference"])
        cells = [row["step"], row["corpus"]]
        for measured in (ours, theirs):
            cells += [
                measured.implementation,
                _number(measured.mb_per_core_second),
                _number(measured.docs_per_core_second),
                _memory(measured.peak_mb),
            ]
        lines.append("| " + " | ".join([*cells, _ratio_cell(row)]) + " |")
    return "\n".join(lines)
