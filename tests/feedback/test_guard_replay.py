"""`dataclean feedback replay --step N`: the step's samples from the loss log, texts from the corpus."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from dataclean.cli import cli
from dataclean.feedback import LossLogWriter
from dataclean.ids import text_hash


def make_run(tmp_path):
    """Steps 0-5 of two ranks, 3 samples each; step 3 of rank 1 holds the garbage sample."""
    logs = tmp_path / "logs"
    batches = {}
    for rank in (0, 1):
        with LossLogWriter(logs, rank=rank, flush_rows=7) as writer:  # several files per rank
            for step in range(6):
                ids = [f"r{rank}s{step}k{k}" for k in range(3)]
                losses = [1.0 + k / 10 for k in range(3)]
                if rank == 1 and step == 3:
                    ids[1], losses[1] = "garbage", 40.0
                writer.log(step, ids, losses, epoch=0, tokens=[10, 11, 12])
                batches[(rank, step)] = dict(zip(ids, losses, strict=True))
    out = tmp_path / "clean"
    (out / "data").mkdir(parents=True)
    ids = sorted({i for batch in batches.values() for i in batch} - {"r0s3k2"})  # one id missing
    texts = [f"the text of {i}\nsecond line" for i in ids]
    pq.write_table(pa.table({"id": ids, "text": texts}), out / "data" / "part-0.parquet")
    return logs, out, batches


def test_replay_lists_the_steps_samples_with_losses_and_texts(tmp_path):
    logs, out, batches = make_run(tmp_path)
    target = tmp_path / "step3.parquet"
    args = ["feedback", "replay", "--step", "3", "--losses", logs, "--corpus", out, "-o", target]
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "step 3: 6 samples, highest loss first"
    assert lines[1].split()[:4] == ["r1", "garbage", "loss", "40"]
    assert "the text of garbage second line" in lines[1]
    assert "r0s3k2" in result.output and "(not in the corpus)" in result.output
    assert "note: 1 of these ids are not in the corpus" in result.output
    rows = pq.read_table(target).to_pylist()
    expected = {**batches[(0, 3)], **batches[(1, 3)]}
    assert {r["sample_id"]: r["loss"] for r in rows} == expected
    by_id = {r["sample_id"]: r for r in rows}
    assert by_id["garbage"]["text"] == "the text of garbage\nsecond line"
    assert by_id["garbage"]["text_hash"] == text_hash("the text of garbage\nsecond line")
    assert by_id["r0s3k2"]["text"] is None
    assert {r["step"] for r in rows} == {3} and {r["tokens"] for r in rows} == {10, 11, 12}


def test_replay_of_one_rank_from_a_jsonl_log(tmp_path):
    log = tmp_path / "losses.jsonl"
    rows = [{"sample_id": f"s{k}", "loss": float(k), "step": k % 2, "rank": k % 3} for k in range(12)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        cli,
        [
            "feedback",
            "replay",
            "--step",
            "1",
            "--rank",
            "2",
            "--losses",
            str(log),
            "-o",
            str(tmp_path / "x.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in written] == ["s11", "s5"]  # step 1, rank 2, highest loss first


def test_replay_of_a_step_not_logged_is_a_clear_error(tmp_path):
    logs, _, _ = make_run(tmp_path)
    result = CliRunner().invoke(cli, ["feedback", "replay", "--step", "99", "--losses", str(logs)])
    assert result.exit_code == 2
    assert "step 99 is not in the loss log" in result.output


def test_feedback_without_a_subcommand_still_needs_its_options(tmp_path):
    result = CliRunner().invoke(cli, ["feedback", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "Missing option '--losses'" in result.output
