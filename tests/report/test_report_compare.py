"""`--compare`: reason counts of both runs, kept ids lost and gained with why, ids newly quarantined."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean.executors.local import LocalExecutor
from dataclean.report.collect import build_report
from dataclean.report.compare import NOT_FOUND_BEFORE, NOT_FOUND_NOW, compare_runs
from dataclean.report.page import render
from dataclean.report.scan import load_output
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText
from tests.conftest import write_jsonl


def _run(tmp_path: Path, name: str, texts: dict[str, str], quarantined: list[str]) -> Path:
    source = write_jsonl(tmp_path / f"{name}.jsonl", [{"id": k, "text": v} for k, v in texts.items()])
    out = tmp_path / name
    run_pipeline([str(source)], str(out), [CleanText()], LocalExecutor())
    if quarantined:  # as the quarantine stage would have written them
        (out / "quarantined").mkdir()
        table = pa.table(
            {
                "id": quarantined,
                "text": ["spiky text"] * len(quarantined),
                "stage": ["quarantine"] * len(quarantined),
                "reason": ["quarantine:loss_spike"] * len(quarantined),
            }
        )
        pq.write_table(table, out / "quarantined" / "part-00000-quarantine-000.parquet")
    return out


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    plain = {f"doc-{i:02d}": f"Plain text number {i}." for i in range(10)}
    earlier = _run(tmp_path, "earlier", {**plain, "doc-10": "   "}, ["q-1"])
    now_texts = {k: v for k, v in plain.items() if k != "doc-05"}
    now_texts.update({"doc-09": "\ue000" * 50, "doc-10": "Fine now.", "doc-12": "A new document."})
    now = _run(tmp_path, "now", now_texts, ["q-1", "q-2"])
    return earlier, now


def test_compare_explains_every_kept_id_that_moved(tmp_path: Path) -> None:
    earlier, now = _two_runs(tmp_path)
    comparison = compare_runs(load_output(str(now)), load_output(str(earlier)))
    lost = {m.reason: (m.count, [e.id for e in m.examples]) for m in comparison.lost}
    assert lost == {"clean:garbage": (1, ["doc-09"]), NOT_FOUND_NOW: (1, ["doc-05"])}
    gained = {m.reason: (m.count, [e.id for e in m.examples]) for m in comparison.gained}
    assert gained == {"clean:empty": (1, ["doc-10"]), NOT_FOUND_BEFORE: (1, ["doc-12"])}
    reasons = {name: (before, after) for name, before, after in comparison.reasons}
    assert reasons == {"clean:garbage": (0, 1), "clean:empty": (1, 0)}
    totals = {name: (before, after) for name, before, after in comparison.totals}
    assert totals["kept"] == (10, 10) and totals["rows_in"] == (11, 11)
    newly = comparison.newly_quarantined
    assert newly.count == 1 and [(e.id, e.reason) for e in newly.examples] == [
        ("q-2", "quarantine:loss_spike")
    ]


def test_compare_section_of_the_page(tmp_path: Path) -> None:
    earlier, now = _two_runs(tmp_path)
    page = render(build_report(str(now), str(earlier)))
    section = page.split('<section id="compare">', 1)[1].split("</section>", 1)[0]
    assert "Kept in the earlier run, not kept now (by this run&#x27;s reason): 2" in section
    assert "Kept now, not kept in the earlier run (by the earlier run&#x27;s reason): 2" in section
    assert "Newly quarantined ids: 1" in section and "q-2" in section and "q-1" not in section
    assert all(f"doc-{i}" in section for i in ("05", "09", "10", "12"))


def test_comparing_a_run_with_itself_shows_no_change(tmp_path: Path) -> None:
    earlier, _ = _two_runs(tmp_path)
    comparison = compare_runs(load_output(str(earlier)), load_output(str(earlier)))
    assert comparison.lost == [] and comparison.gained == [] and comparison.newly_quarantined.count == 0
    assert all(before == after for _, before, after in comparison.reasons)
