"""The CLI: a successful run, --only/--skip/--set, and one-line errors for every user mistake."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dataclean.cli import cli
from tests.conftest import PROGRESS_LINE, SAMPLE, read_rows, write_jsonl


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output  # stdout and stderr, interleaved


def test_run_on_the_sample_prints_a_summary(tmp_path: Path) -> None:
    code, output = _invoke("run", str(SAMPLE), "-o", str(tmp_path / "out"), "--executor", "local")
    assert code == 0, output
    assert "kept" in output
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["totals"]["invariant_holds"]
    # The summary (printed as to a pipe) fits 80 columns, with every reason whole: the stage's row
    # names the stage, so its reasons come without the prefix, one a line.
    lines = [line for line in output.splitlines() if not line.startswith("wrote ")]
    assert max(map(len, lines)) <= 80
    clean = next(i for i, line in enumerate(lines) if line.split()[:1] == ["clean"])
    reasons = {reason.removeprefix("clean:") for reason in stats["stages"][1]["dropped"]}
    assert {"random_bytes", "empty"} <= reasons
    for reason in reasons:
        assert any(reason in line.split() for line in lines[clean : clean + 6])
    # Every stage's reasons (the quality stage's long datatrove names too) whole, with their counts.
    rows = {tuple(line.split()) for line in lines}
    for stage in stats["stages"]:
        for reason, count in stage["dropped"].items():
            assert (reason.removeprefix(stage["stage"] + ":"), f"{count:,}") in rows, reason


def test_set_changes_a_parameter_and_skip_removes_a_stage(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "in.jsonl", [{"text": "x " + "ab" * 100}, {"text": "fine"}])
    local = ("--executor", "local")
    # both rows are too short for the quality stage's rules; "abab..." is also a long n-gram run
    families = ("gopher_repetition", "gopher_quality", "c4", "fineweb", "long_ngram_run")
    off = [arg for name in families for arg in ("--set", f"quality.{name}=off")]
    code, _ = _invoke("run", str(inp), "-o", str(tmp_path / "a"), *local, *off)
    assert code == 0 and len(read_rows(tmp_path / "a" / "data")) == 2
    code, _ = _invoke("run", str(inp), "-o", str(tmp_path / "b"), *local, "--skip", "quality")
    assert code == 0 and len(read_rows(tmp_path / "b" / "data")) == 2
    code, _ = _invoke("run", str(inp), "-o", str(tmp_path / "c"), *local, "--only", "clean,language,quality")
    assert code == 0 and len(read_rows(tmp_path / "c" / "data")) == 0


def test_user_recipe_file(tmp_path: Path) -> None:
    recipe = tmp_path / "mine.py"
    recipe.write_text(
        "from dataclean.stages.clean import CleanText\n"
        "def build():\n    return [CleanText(max_garbage_fraction=0.5)]\n"
    )
    inp = write_jsonl(tmp_path / "in.jsonl", [{"text": "x " + "ab" * 100}])
    code, output = _invoke(
        "run", str(inp), "-o", str(tmp_path / "o"), "--executor", "local", "--pipeline", str(recipe)
    )
    assert code == 0, output
    assert len(read_rows(tmp_path / "o" / "data")) == 1


@pytest.mark.parametrize(
    ("make", "extra", "message"),
    [
        (lambda d: d / "missing.jsonl", [], "missing.jsonl: no such file or folder"),
        (lambda d: _write(d / "bad.parquet", b"not parquet"), [], "bad.parquet: not a readable Parquet file"),
        (lambda d: _parquet(d / "p.parquet", {"body": ["x"]}), [], "p.parquet: no column 'text'"),
        (lambda d: _write(d / "n.jsonl", b'{"text": 3}\n'), [], "n.jsonl, line 1: text is int"),
        (lambda d: _write(d / "x.csv", b"a,b\n"), [], "x.csv: unknown format"),
        (lambda d: _write(d / "j.jsonl", b"{broken\n"), [], "j.jsonl, line 1: invalid JSON"),
        (lambda d: _write(d / "ok.jsonl", b'{"text": "a"}\n'), ["--set", "nope.x=1"], "unknown stage 'nope'"),
        (
            lambda d: _write(d / "ok.jsonl", b'{"text": "a"}\n'),
            ["--set", "clean.bogus=1"],
            "has no parameter 'bogus' (valid: fix_mojibake, max_encoded_fraction, max_garbage_fraction",
        ),
        (
            lambda d: _write(d / "ok.jsonl", b'{"text": "a"}\n'),
            ["--set", "language.sample_chars=abc"],
            "language.sample_chars: 'abc' is not a valid int",
        ),
        (
            lambda d: _write(d / "ok.jsonl", b'{"text": "a"}\n'),
            ["--set", "clean.max_garbage_fraction=2"],
            "max_garbage_fraction must be in",
        ),
        (
            lambda d: _write(d / "ok.jsonl", b'{"text": "a"}\n'),
            ["--pipeline", "nosuch"],
            "no recipe of that name",
        ),
        (
            lambda d: _write(d / "ok.jsonl", b'{"text": "a"}\n'),
            ["--set", "language.keep=zh,eng"],
            "language.keep: 'eng' is not a language code of lid.176",
        ),
    ],
)
def test_user_errors_are_one_line_with_nonzero_exit(
    tmp_path: Path, make: object, extra: list[str], message: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    code, output = _invoke("run", str(path), "-o", str(tmp_path / "out"), "--executor", "local", *extra)
    assert code != 0
    assert message in output
    assert "Traceback" not in output
    # One line says what failed; any other is a progress line from before it ("[  0.3s] ...").
    lines = [line for line in output.splitlines() if line.strip()]
    assert len([line for line in lines if line.startswith("error: ")]) == 1
    assert all(line.startswith("error: ") or PROGRESS_LINE.match(line) for line in lines), lines


def test_python_dash_m_works_like_the_command(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dataclean", "run", str(tmp_path / "missing"), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "no such file or folder" in result.stderr and "Traceback" not in result.stderr


def test_the_program_exits_with_its_output_flushed(tmp_path: Path) -> None:
    # The program leaves without the interpreter's teardown: its summary, pipes and files are complete.
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "dataclean", "run", str(SAMPLE), "-o", str(out), "--executor", "local"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    kept = json.loads((out / "stats.json").read_text())["totals"]["kept"]
    assert "total" in result.stdout and result.stdout.endswith(f"wrote {out}: {kept:,} rows kept\n")
    assert (out / "report.html").stat().st_size > 0


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _parquet(path: Path, columns: dict[str, list[object]]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_subcommands_that_load_on_demand_are_listed_and_run() -> None:
    code, output = _invoke("--help")
    assert code == 0 and all(name in output for name in ("run", "report", "feedback", "lm"))
    for name in ("feedback", "lm"):
        code, output = _invoke(name, "--help")
        assert code == 0 and "Usage:" in output and name in output


def test_output_naming_an_existing_file_is_one_line(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "fine"}])
    taken = _write(tmp_path / "notes.txt", b"mine")
    code, output = _invoke("run", str(source), "-o", str(taken), "--executor", "local")
    assert code == 2 and output.strip().count("\n") == 0
    assert output.startswith(f"error: {taken} is a file: the output (-o) is a folder")
    assert taken.read_bytes() == b"mine"


def test_rerun_into_a_finished_output_says_so(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "fine words here"}])
    out = tmp_path / "out"
    args = ("run", str(source), "-o", str(out), "--executor", "local", "--only", "clean")
    assert _invoke(*args)[0] == 0
    code, output = _invoke(*args)
    assert code == 0
    expected = f"{out} already holds this run, complete (same config and inputs): nothing to do; "
    lines = output.splitlines()
    assert lines[-1] == expected + "1 rows kept. --overwrite runs it again."
    assert all(PROGRESS_LINE.match(line) for line in lines[:-1])  # no old wall time, no table


class _Lines:
    """A `RunProgress` that keeps what a run says, as the display would show it."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def step(self, text: str) -> None:
        self.said.append(text)

    def group(self, label: str, shards: int, skipped: int) -> None:
        self.said.append(f"{label}: {shards} shards, {skipped} skipped")

    def task(self, label: str, rows: int, text_bytes: int) -> None:
        self.said.append(f"{label}: task of {rows} rows")

    def note(self, text: str) -> None:
        self.said.append(text)


def test_progress_lines_say_what_the_run_does_in_order(tmp_path: Path) -> None:
    # Piped (CliRunner is no terminal): stamped lines, each step in the order the run takes it.
    code, output = _invoke("run", str(SAMPLE), "-o", str(tmp_path / "out"), "--executor", "local")
    assert code == 0, output
    said = [PROGRESS_LINE.sub("", line) for line in output.splitlines() if PROGRESS_LINE.match(line)]
    assert said[0] == "loading stages" and said[1] == "3 input files, 1.1 MB"
    groups = [line for line in said if " " not in line]
    assert groups == ["clean..dedup", "dedup..perplexity_filter", "perplexity_filter..quarantine"]
    for group in groups:  # each group's own line when it ends: shards, rows, MB, MB/s
        assert re.fullmatch(
            rf"{re.escape(group)}: 3/3 shards, [\d,]+ rows, [\d.]+ MB, [\d.]+ MB/s",
            said[said.index(group) + 1],
        )
    assert said.index("dedup: fitting over the whole corpus") > said.index("clean..dedup")
    assert said[-2:] == ["writing stats", "writing report"]
    code, quiet = _invoke("run", str(SAMPLE), "-o", str(tmp_path / "q"), "--executor", "local", "--quiet")
    assert code == 0 and not PROGRESS_LINE.search(quiet) and quiet.startswith("wrote ")


def test_a_resumed_run_says_so_and_what_it_skips(tmp_path: Path) -> None:
    from dataclean.executors.local import LocalExecutor
    from dataclean.io.layout import Layout
    from dataclean.run import run_pipeline
    from dataclean.run.recipes import load_recipe

    source = tmp_path / "in"
    source.mkdir()
    for shard in range(3):
        write_jsonl(source / f"{shard}.jsonl", [{"text": f"Shard {shard} holds a few plain words."}])
    out = tmp_path / "out"
    stages = [stage for stage in load_recipe("default") if stage.name in ("clean", "dedup")]
    run_pipeline([str(source)], str(out), stages, LocalExecutor(), keep_work=True, report=False)
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "complete": False}))  # as if it stopped
    Path(Layout(str(out)).done_marker(1, 2)).unlink()  # before the last shard of the last group
    lines = _Lines()
    again = [stage for stage in load_recipe("default") if stage.name in ("clean", "dedup")]
    run_pipeline([str(source)], str(out), again, LocalExecutor(), progress=lines, report=False)
    assert lines.said[0] == f"resuming the run in {out} (same config): 3 input files, 0.0 MB"
    assert "clean..dedup: 3 shards, 3 skipped" in lines.said  # nothing left to do there
    assert "dedup: 3 shards, 2 skipped" in lines.said and lines.said.count("dedup: task of 1 rows") == 1
