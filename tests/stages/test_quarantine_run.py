"""`dataclean run --quarantine LIST` end to end (local executor)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from dataclean.cli import cli
from dataclean.ids import text_hash
from dataclean.quarantine.lists import make_list, write_list
from tests.conftest import FIXTURE_ROOT

FIXTURE = FIXTURE_ROOT / "feedback" / "paragraphs.jsonl"


def make_input(tmp_path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    texts = {row["id"]: row["text"] for row in rows}
    words = texts["en-010"].split(" ")
    words[4] = "certainly"
    rows.append({"id": "copy-of-10", "text": " ".join(words)})  # near-duplicate of en-010
    rows.append({"id": "renamed-12", "text": texts["en-012"]})  # en-012 under another id
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return texts


def run(*args: str):
    # The input holds deliberate copies for quarantine to match: keep the dedup stage out of it
    # (and the quality stage, whose rules would drop the short samples before the list does).
    skip = ("--skip", "dedup,quality")
    result = CliRunner().invoke(cli, ["run", *args, "--executor", "local", "--quiet", *skip])
    return result


def test_run_drops_exactly_the_listed_samples_and_their_near_duplicates(tmp_path):
    texts = make_input(tmp_path)
    listed = make_list(
        [
            {"sample_id": "en-010", "reason": "loss_outlier"},
            {"sample_id": "zh-001", "reason": "spike:40"},
            {"sample_id": "old-id", "text_hash": text_hash(texts["en-012"]), "reason": "loss_outlier"},
            {"sample_id": "en-020", "action": "downweight", "weight": 0.25},
            {"sample_id": "not-in-corpus", "reason": "loss_outlier"},
        ]
    )
    write_list(listed, tmp_path / "q.parquet")
    out = tmp_path / "out"
    result = run(str(tmp_path / "in.jsonl"), "-o", str(out), "--quarantine", str(tmp_path / "q.parquet"))
    assert result.exit_code == 0, result.output

    # Every row the list touched, in one place: the dropped ones and a copy of the down-weighted one.
    quarantined = pq.read_table(out / "quarantined").to_pylist()
    assert {r["id"]: (r["reason"], r["action"]) for r in quarantined} == {
        "en-010": ("quarantine:loss_outlier", "drop"),
        "zh-001": ("quarantine:spike:40", "drop"),
        "en-012": ("quarantine:loss_outlier", "drop"),
        "renamed-12": ("quarantine:loss_outlier", "drop"),
        "copy-of-10": ("quarantine:near_duplicate_of:en-010", "drop"),
        "en-020": ("quarantine:listed", "downweight"),
    }
    kept = pq.read_table(out / "data")
    assert kept.num_rows == 42 - 5 and "action" not in kept.column_names
    weights = dict(zip(kept.column("id").to_pylist(), kept.column("weight").to_pylist(), strict=True))
    assert weights["en-020"] == 0.25 and weights["en-021"] == 1.0  # the down-weighted row is kept
    assert [r["weight"] for r in quarantined if r["id"] == "en-020"] == [0.25]
    assert all(r["text"] for r in quarantined)
    stats = json.loads((out / "stats.json").read_text())
    totals = stats["totals"]
    assert (totals["quarantined"], totals["copied"]) == (5, 1)  # the copy is counted once, as kept
    assert totals["kept"] + totals["excluded"] + 5 == totals["rows_in"] and totals["invariant_holds"]

    # Applying the list again to what was kept changes nothing: the down-weighted row is listed
    # again, with the same weight; nothing else is touched.
    again = run(str(out / "data"), "-o", str(tmp_path / "again"), "--quarantine", str(tmp_path / "q.parquet"))
    assert again.exit_code == 0, again.output
    listed_again = pq.read_table(tmp_path / "again" / "quarantined").to_pylist()
    assert [(r["id"], r["action"], r["weight"]) for r in listed_again] == [("en-020", "downweight", 0.25)]
    again_kept = pq.read_table(tmp_path / "again" / "data")
    assert again_kept.num_rows == kept.num_rows
    assert (
        dict(zip(again_kept.column("id").to_pylist(), again_kept.column("weight").to_pylist(), strict=True))
        == weights
    )


def test_a_changed_list_is_a_new_config_not_a_resume(tmp_path):
    make_input(tmp_path)
    write_list(make_list([{"sample_id": "en-001"}]), tmp_path / "q.parquet")
    args = [
        str(tmp_path / "in.jsonl"),
        "-o",
        str(tmp_path / "out"),
        "--quarantine",
        str(tmp_path / "q.parquet"),
    ]
    assert run(*args).exit_code == 0
    write_list(make_list([{"sample_id": "en-002"}]), tmp_path / "q.parquet")
    refused = run(*args)
    assert refused.exit_code != 0 and "list_sha256" in refused.output


def test_a_missing_list_is_a_clear_error(tmp_path):
    make_input(tmp_path)
    result = run(
        str(tmp_path / "in.jsonl"),
        "-o",
        str(tmp_path / "out"),
        "--quarantine",
        str(tmp_path / "nope.parquet"),
    )
    assert result.exit_code == 2
    assert "nope.parquet" in result.output and "Traceback" not in result.output


def test_feedback_is_a_dataclean_command():
    result = CliRunner().invoke(cli, ["feedback", "--help"])
    assert result.exit_code == 0 and "--losses" in result.output


def test_local_and_ray_quarantine_the_same_rows(tmp_path, ray_executor):
    from dataclean.executors.local import LocalExecutor
    from dataclean.run import run_pipeline
    from dataclean.stages.clean import CleanText
    from dataclean.stages.quarantine import DropQuarantined

    make_input(tmp_path)
    write_list(make_list([{"sample_id": "en-010", "reason": "loss_outlier"}]), tmp_path / "q.parquet")
    outputs = {}
    for name, executor in (("local", LocalExecutor()), ("ray", ray_executor)):
        stages = [CleanText(), DropQuarantined(path=str(tmp_path / "q.parquet"))]
        run_pipeline([str(tmp_path / "in.jsonl")], str(tmp_path / name), stages, executor)
        rows = pq.read_table(tmp_path / name / "quarantined").to_pylist()
        outputs[name] = sorted((row["id"], row["reason"]) for row in rows)
    assert (
        outputs["local"]
        == outputs["ray"]
        == [
            ("copy-of-10", "quarantine:near_duplicate_of:en-010"),
            ("en-010", "quarantine:loss_outlier"),
        ]
    )
