"""The report opens in headless Chromium, offline, and every chart is drawn with its bars.

Plotly adds its `svg.main-svg` layers and one `g.point` path per bar only when its JavaScript ran,
so finding them in the DOM after loading the page from a file proves the embedded plotly.js
worked without a network. Skipped (with the reason) where Chromium is not installed; CI installs
it (`.ci/run`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from dataclean.executors.local import LocalExecutor
from dataclean.report import write_report
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText
from dataclean.stages.language import IdentifyLanguage
from tests.conftest import SAMPLE
from tests.report.report_synthetic import make_synthetic_output

CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"
)


class Charts(HTMLParser):
    """Per plotly chart div: its main-svg sizes and how many bar paths it drew."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[dict[str, Any]] = []
        self._depth = 0  # div nesting inside the current chart; 0 when outside any

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        if tag == "div":
            if self._depth:
                self._depth += 1
            elif "plotly-graph-div" in classes:
                self.charts.append({"svgs": [], "bars": 0})
                self._depth = 1
        elif self._depth and tag == "svg" and "main-svg" in classes:
            self.charts[-1]["svgs"].append(
                (float(values.get("width") or 0), float(values.get("height") or 0))
            )
        elif self._depth and tag == "path" and re.match(r"M[\d.]+,[\d.]+[VH]", values.get("d") or ""):
            self.charts[-1]["bars"] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._depth:
            self._depth -= 1


def rendered_dom(page: Path, profile: Path) -> str:
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,2000",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _check_charts(page: Path, profile: Path) -> int:
    source = page.read_text()
    expected = source.count("Plotly.newPlot(")
    parser = Charts()
    parser.feed(rendered_dom(page, profile))
    assert expected and len(parser.charts) == expected
    for chart in parser.charts:
        assert chart["svgs"] and all(w > 100 and h > 100 for w, h in chart["svgs"]), chart
        assert chart["bars"] > 0, chart
    return expected


def test_sample_report_renders_every_chart(tmp_path: Path) -> None:
    out = tmp_path / "sample"
    # The languages chart needs `lang`, which only the language stage provides.
    run_pipeline([str(SAMPLE)], str(out), [CleanText(), IdentifyLanguage()], LocalExecutor())
    assert _check_charts(out / "report.html", tmp_path / "profile") == 4  # rows, bytes, reasons, languages


def test_full_report_with_comparison_renders_every_chart(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier"
    run_pipeline([str(SAMPLE)], str(earlier), [CleanText()], LocalExecutor())
    out = tmp_path / "synthetic"
    make_synthetic_output(out)
    write_report(str(out), str(earlier))
    # rows, bytes, reasons, languages, perplexity en + zh, lengths, cluster sizes, Jaccard,
    # compared reasons
    assert _check_charts(out / "report.html", tmp_path / "profile") == 10
