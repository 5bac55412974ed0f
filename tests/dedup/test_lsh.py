"""LSH bands: chosen by datasketch's optimizer once per cache folder, then read back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

CHOOSE = (
    "import sys; from dataclean.dedup.lsh import choose_bands; "
    "print(choose_bands(0.7, 128), 'datasketch' in sys.modules)"
)


def test_a_later_process_reads_the_chosen_bands_without_importing_datasketch(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def choose() -> str:
        found = subprocess.run(
            [sys.executable, "-c", CHOOSE], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
        )
        assert found.returncode == 0, found.stderr[-2000:]
        return found.stdout.strip()

    assert choose() == "(23, 5) True"  # a first run asks the optimizer
    assert choose() == "(23, 5) False"  # a later one reads its answer
    (tmp_path / "dataclean-lsh" / "bands.json").write_text("not json")
    assert choose() == "(23, 5) True"  # an unreadable note: asked again, never an error
