"""docs/writing-a-stage.md holds: a row-local stage that needs `lang` and adds a column is one
stage file and one recipe line. The stage is that page's own code block, taken from it as it
is; the recipe is the default one with that one line added after the language stage."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import ROOT, write_jsonl

MARKER = "<!-- example-stage:"


def readme_stage() -> str:
    """The Python block that follows the example-stage marker in docs/writing-a-stage.md."""
    text = (ROOT / "docs" / "writing-a-stage.md").read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"[^\n]*\n```python\n(.*?)\n```", text, re.S)
    assert found is not None, "docs/writing-a-stage.md lost its example stage"
    return found.group(1) + "\n"


def recipe(after_language: bool) -> str:
    """The default recipe plus the one line (`DropDigitHeavy(),`), after or before `language`."""
    position = "index + 1" if after_language else "index"
    return (
        "from digits import DropDigitHeavy\n"
        "from pipelines import default\n\n\n"
        "def build():\n"
        "    stages = default.build()\n"
        "    index = [stage.name for stage in stages].index('language')\n"
        f"    stages.insert({position}, DropDigitHeavy())\n"
        "    return stages\n"
    )


def _run(folder: Path, recipe_file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    rows = [
        {"id": "words", "text": "An ordinary English sentence about a river and its banks in spring."},
        {"id": "numbers", "text": "Call 555 0100 2233 4455 6677 8899 0011 2233 4455 6677 now."},
        {"id": "zh", "text": "长江是中国第一长河，全长约六千三百公里，流经青海、西藏、四川等省区。"},
    ]
    inp = write_jsonl(folder / "in.jsonl", rows)
    command = [sys.executable, "-m", "dataclean", "run", str(inp), "-o", str(folder / "out")]
    # One-sentence rows: the quality stage would drop them all (too short for Gopher's rules).
    command += ["--pipeline", str(recipe_file), "--executor", "local", "--quiet", "--skip", "quality"]
    command += extra
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)


def test_the_readme_stage_runs_from_two_files_and_one_recipe_line(tmp_path: Path) -> None:
    (tmp_path / "digits.py").write_text(readme_stage())
    (tmp_path / "recipe.py").write_text(recipe(after_language=True))
    result = _run(tmp_path, tmp_path / "recipe.py")
    assert result.returncode == 0, result.stderr[-3000:]
    kept = {row["id"]: row for row in pq.read_table(tmp_path / "out" / "data").to_pylist()}
    excluded = {row["id"]: row["reason"] for row in pq.read_table(tmp_path / "out" / "excluded").to_pylist()}
    assert excluded == {"numbers": "digits:mostly_digits"}
    assert set(kept) == {"words", "zh"} and all(row["digit_share"] == 0.0 for row in kept.values())

    again = tmp_path / "again"
    again.mkdir()
    (again / "digits.py").write_text(readme_stage())
    result = _run(again, tmp_path / "recipe.py", "--set", "digits.max_share=0.9")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {row["id"] for row in pq.read_table(again / "out" / "data").to_pylist()} == {
        "words",
        "numbers",
        "zh",
    }


def test_the_readme_stage_before_the_language_stage_fails_at_planning(tmp_path: Path) -> None:
    (tmp_path / "digits.py").write_text(readme_stage())
    (tmp_path / "early.py").write_text(recipe(after_language=False))
    result = _run(tmp_path, tmp_path / "early.py")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: stage 'digits' needs column 'lang', which no stage before it provides "
        "(add the language stage before it)"
    )
    assert not (tmp_path / "out").exists()
