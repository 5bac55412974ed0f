"""A user's error reads the same on every executor: one line naming the file, the same exit status."""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from dataclean.errors import ConfigError, DatacleanError, InputError, OutputError, StageError
from tests.conftest import ROOT, message_lines


@pytest.mark.parametrize(
    "error",
    [
        InputError("in/a.jsonl.gz", "truncated: the compressed stream ends early"),
        InputError("in/b.jsonl", "invalid JSON", line=7),
        InputError("in/c.parquet", "cannot read (corrupt)", row=2048),
        ConfigError("clean.bogus: no such parameter"),
        OutputError("out exists with another config"),
        StageError("stage 'clean' failed on in/a.jsonl, row id 'x'"),
    ],
)
def test_every_error_survives_pickling_whole(error: DatacleanError) -> None:
    # What Ray does to an exception raised in a worker on its way to the driver.
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error) and copy.exit_code == error.exit_code
    assert vars(copy) == vars(error)  # path, row and detail too


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    for shard in range(3):
        rows = [{"text": f"Shard {shard}, document {i}: some ordinary words."} for i in range(300)]
        (folder / f"good{shard}.jsonl.gz").write_bytes(
            gzip.compress("".join(json.dumps(row) + "\n" for row in rows).encode())
        )
    whole = (folder / "good0.jsonl.gz").read_bytes()
    (folder / "broken.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    return folder


def _run(inp: Path, out: Path, executor: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dataclean", "run", str(inp), "-o", str(out), "--executor", executor]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_truncated_shard_is_the_same_one_line_error_on_ray_and_local(tmp_path: Path) -> None:
    inp = _corpus(tmp_path / "in")
    on_ray = _run(inp, tmp_path / "ray", "ray")  # an embedded Ray: the error is raised in a worker
    local = _run(inp, tmp_path / "local", "local")
    broken = inp / "broken.jsonl.gz"
    for result in (on_ray, local):
        assert result.returncode == 2, result.stderr[-3000:]
        lines = message_lines(result.stderr)  # and progress lines before it
        assert len(lines) == 1, result.stderr[-3000:]
        assert lines[0].startswith(f"error: {broken}: truncated: the compressed stream ends early, in line ")
    assert message_lines(on_ray.stderr) == message_lines(local.stderr)
