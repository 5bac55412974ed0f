"""`dataclean feedback` end to end on synthetic logs: outputs, merge, corpus, bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from dataclean.feedback.analysis.cli import feedback
from dataclean.quarantine.lists import read_list
from dataclean.quarantine.schema import QUARANTINE_SCHEMA
from tests.feedback.planted import PlantedRun


def small_run(**overrides):
    """300 steps x 16 samples from 1,600 ids (3 epochs) on 4 ranks, warm-up 30 steps."""
    settings = {"steps": 300, "batch": 16, "samples": 1600, "ranks": 4, "warmup": 30, **overrides}
    return PlantedRun(**settings)


def write_run(tmp_path, run, step_columns=("lr", "grad_norm", "loss_scale")):
    logs = tmp_path / "logs"
    logs.mkdir()
    losses = run.losses()
    half = losses.num_rows // 2
    pq.write_table(losses.slice(0, half), logs / "losses-0.parquet")
    pq.write_table(losses.slice(half), logs / "losses-1.parquet")
    pq.write_table(run.step_log(step_columns), tmp_path / "steps.parquet")
    return logs, tmp_path / "steps.parquet"


def corpus_of(tmp_path, run, missing=()):
    out = tmp_path / "clean"
    (out / "data").mkdir(parents=True)
    ids = [i for i in run.ids.tolist() if i not in missing]
    texts = [f"text of {i} " * 5 for i in ids]
    pq.write_table(pa.table({"id": ids, "text": texts}), out / "data" / "part-0.parquet")
    return out


def invoke(*args):
    result = CliRunner().invoke(feedback, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_outputs_list_spikes_report_and_picture(tmp_path):
    run = small_run()
    outliers = run.plant_outliers(10)
    blamed = run.plant_data_spike(180)
    run.plant_grad_explosion(240, climb=60)
    logs, steps = write_run(tmp_path, run)
    corpus = corpus_of(tmp_path, run, missing={"s000003"})
    out = tmp_path / "out"
    result = invoke("--losses", logs, "--steps", steps, "--corpus", corpus, "-o", out)
    assert "spikes: 1 data, 1 grad_explosion" in result.output
    assert "1 sample ids in the loss log are not in the corpus" in result.output

    listed = read_list(out / "quarantine.parquet")
    assert sorted(listed.column("sample_id").to_pylist()) == sorted(outliers + blamed)
    row = listed.to_pylist()[0]
    assert row["text_hash"] and row["text"].startswith("text of") and row["action"] == "drop"
    assert pq.read_schema(out / "quarantine.parquet").names[:11] == QUARANTINE_SCHEMA.names[:11]

    spikes = json.loads((out / "spikes.json").read_text())
    assert [(s["step"], s["diagnosis"]) for s in spikes] == [(180, "data"), (240, "grad_explosion")]
    # The planted spike samples, and a planted outlier that happened to share their batch.
    assert set(blamed) <= set(spikes[0]["sample_ids"]) <= set(blamed + outliers)
    assert all(s["evidence"] and s["action"] for s in spikes)

    report = (out / "report.md").read_text()
    assert "### Step 240: grad_explosion" in report and blamed[0] in report
    assert "text of" in report and "training.png" in report
    assert (out / "training.png").read_bytes()[:4] == b"\x89PNG"


def test_merge_with_an_existing_list_is_idempotent(tmp_path):
    run = small_run()
    run.plant_outliers(5)
    logs, _ = write_run(tmp_path, run)
    invoke("--losses", logs, "-o", tmp_path / "first")
    first = read_list(tmp_path / "first" / "quarantine.parquet")
    invoke(
        "--losses",
        logs,
        "-o",
        tmp_path / "second",
        "--merge",
        tmp_path / "first" / "quarantine.parquet",
    )
    second = read_list(tmp_path / "second" / "quarantine.parquet")
    assert second.column("sample_id").to_pylist() == first.column("sample_id").to_pylist()
    assert second.drop_columns(["added_at", "source"]).equals(first.drop_columns(["added_at", "source"]))


def test_step_log_without_grad_norm_says_what_is_missing(tmp_path):
    run = small_run()
    run.plant_data_spike(180)
    logs, steps = write_run(tmp_path, run, step_columns=())
    invoke("--losses", logs, "--steps", steps, "-o", tmp_path / "out")
    spikes = json.loads((tmp_path / "out" / "spikes.json").read_text())
    assert spikes[0]["diagnosis"] == "data"
    assert spikes[0]["missing"] == ["lr", "grad_norm", "loss_scale"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "step log: lr, grad_norm, loss_scale" in report


def test_empty_log_writes_an_empty_list(tmp_path):
    (tmp_path / "losses.jsonl").write_text("")
    result = invoke("--losses", tmp_path / "losses.jsonl", "-o", tmp_path / "out")
    assert "0 loss rows" in result.output
    assert read_list(tmp_path / "out" / "quarantine.parquet").num_rows == 0
    assert json.loads((tmp_path / "out" / "spikes.json").read_text()) == []
    assert "the loss log is empty" in (tmp_path / "out" / "report.md").read_text()


def test_nonfinite_losses_are_counted(tmp_path):
    lines = [json.dumps({"sample_id": f"s{i}", "loss": 2.0, "step": i // 4}) for i in range(200)]
    lines[10] = json.dumps({"sample_id": "s10", "loss": float("nan"), "step": 2})
    (tmp_path / "losses.jsonl").write_text("\n".join(lines))
    result = invoke("--losses", tmp_path / "losses.jsonl", "-o", tmp_path / "out")
    assert "1 non-finite" in result.output
    listed = read_list(tmp_path / "out" / "quarantine.parquet").to_pylist()
    assert [(r["sample_id"], r["reason"]) for r in listed] == [("s10", "nonfinite_loss")]


def test_bad_log_is_a_message_not_a_traceback(tmp_path):
    pq.write_table(pa.table({"id": ["a"], "value": [1.0]}), tmp_path / "bad.parquet")
    result = CliRunner().invoke(
        feedback, ["--losses", str(tmp_path / "bad.parquet"), "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "needs column(s) sample_id, loss" in result.output
    assert "Traceback" not in result.output
