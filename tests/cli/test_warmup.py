"""`dataclean warmup` compiles a recipe's kernels into this machine's cache once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURE_ROOT, ROOT

RECIPE = FIXTURE_ROOT / "crash_once_recipe.py"  # CleanText's kernels: quick to compile
# Twice in one process, on a fresh cache: the cache's note is keyed by dataclean's source files,
# which other work in this checkout may touch between two processes.
TWICE = """
import sys
from dataclean.cli import cli
for _ in range(2):
    cli.main(["warmup", "--pipeline", sys.argv[1]], standalone_mode=False)
"""


def test_warmup_compiles_into_a_fresh_cache_then_finds_it_warm(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    command = [sys.executable, "-c", TWICE, str(RECIPE)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, again = done.stdout.splitlines()
    assert first.startswith(f"compiled the kernels of {RECIPE} (clean) into {cache} in ")
    assert any(path.suffix == ".nbi" for path in cache.rglob("*"))  # numba's index files
    assert again == f"{cache} already holds the kernels of {RECIPE}: nothing to do"
