"""Log writers and readers: round trips, crash safety, formats, bad input."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.errors import InputError
from dataclean.feedback import LossLogWriter, StepLogWriter
from dataclean.feedback.logs import read_loss_log, read_step_log


def test_loss_writer_round_trip(tmp_path):
    with LossLogWriter(tmp_path, rank=1, flush_rows=4) as writer:
        for step in range(3):
            writer.log(step, [f"s{step}a", f"s{step}b"], [1.5, 2.5], epoch=0, tokens=[10, 0])
    assert len(writer.files) == 2  # 4 rows, then the last 2 on close
    log = read_loss_log(tmp_path)
    assert log.table.num_rows == 3  # the rows with tokens == 0 are left out
    assert log.table.column("sample_id").to_pylist() == ["s0a", "s1a", "s2a"]
    assert set(log.table.column("rank").to_pylist()) == {1}
    assert log.missing == []
    assert any("tokens == 0" in note for note in log.notes)


def test_step_writer_round_trip(tmp_path):
    with StepLogWriter(tmp_path) as writer:
        writer.log(0, 3.0, lr=1e-4)
        writer.log(1, 2.5, lr=2e-4)
    log = read_step_log(tmp_path)
    assert log.table.column("loss").to_pylist() == [3.0, 2.5]
    assert log.missing == ["grad_norm", "loss_scale"]


WRITER = textwrap.dedent(
    """
    import sys, time
    from dataclean.feedback import LossLogWriter
    writer = LossLogWriter(sys.argv[1], flush_rows=100)
    step = 0
    while True:
        writer.log(step, [f"id{step}-{i}" for i in range(50)], [1.0] * 50)
        step += 1
        if step == 20:
            print("flushed", flush=True)
    """
)


def test_files_are_readable_after_the_writer_is_killed(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "flushed"
        time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    files = sorted(tmp_path.glob("*.parquet"))
    assert files, "nothing was flushed"
    for file in files:
        assert pq.read_table(file).num_rows == 100  # every visible file is whole
    log = read_loss_log(tmp_path)  # hidden temp files of an interrupted flush are skipped
    assert log.table.num_rows == 100 * len(files)
    # A torn temp file left by the crash must not break reading.
    (tmp_path / ".losses-torn.parquet.tmp").write_bytes(b"PAR1 torn")
    assert read_loss_log(tmp_path).table.num_rows == log.table.num_rows


def test_jsonl_with_nan_csv_and_int_ids(tmp_path):
    lines = [
        json.dumps({"sample_id": 1, "loss": 2.0, "step": 0}),
        json.dumps({"sample_id": 2, "loss": float("nan"), "step": 0}),
        json.dumps({"sample_id": 3, "loss": float("inf"), "step": 1}),
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "b.csv").write_text("sample_id,loss,step\n4,1.5,2\n5,nan,2\n")
    log = read_loss_log(tmp_path)
    assert log.table.column("sample_id").to_pylist() == ["1", "2", "3", "4", "5"]
    losses = log.table.column("loss").to_pylist()
    assert math.isnan(losses[1]) and math.isinf(losses[2]) and math.isnan(losses[4])
    assert log.missing == ["epoch", "rank", "tokens"]


def test_missing_required_column_names_the_file(tmp_path):
    pq.write_table(pa.table({"sample_id": ["a"], "value": [1.0]}), tmp_path / "bad.parquet")
    with pytest.raises(InputError, match=r"bad\.parquet.*needs column\(s\) loss"):
        read_loss_log(tmp_path / "bad.parquet")


def test_empty_log_is_not_an_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    log = read_loss_log(tmp_path)
    assert log.table.num_rows == 0 and "the loss log is empty" in log.notes


def test_step_log_rows_per_rank_are_averaged(tmp_path):
    pq.write_table(pa.table({"step": [0, 0, 1, 1], "loss": [2.0, 4.0, 1.0, 3.0]}), tmp_path / "s.parquet")
    log = read_step_log(tmp_path)
    assert log.table.column("loss").to_pylist() == [3.0, 2.0]
