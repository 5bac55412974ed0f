"""Report excerpts show why a row went: a window around the evidence, and for the clean stage's
drops the text as it came in beside what cleaning keeps."""

from __future__ import annotations

import base64
from pathlib import Path

from dataclean.executors.local import LocalExecutor
from dataclean.report.collect import build_report
from dataclean.report.evidence import evidence_span, window
from dataclean.report.excerpts import make_excerpt
from dataclean.report.page import render
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText
from tests.conftest import write_jsonl

PROSE = "An ordinary paragraph of prose about rivers, bridges and the towns along them. " * 8


def test_window_centres_on_the_evidence() -> None:
    text = PROSE + "ha" * 60 + PROSE
    span = evidence_span("quality:long_ngram_run", text)
    assert span is not None and text[span[0] : span[1]].startswith("haha")
    start, stop = window(len(text), span, 300)
    assert start == span[0] - 100 and stop == start + 300
    assert window(len(text), None, 300) == (0, 300)
    assert window(50, (40, 45), 300) == (0, 50)
    blob = base64.b64encode(bytes(range(256)) * 2).decode()
    assert evidence_span("clean:encoded_data", PROSE + blob)[0] == len(PROSE)  # type: ignore[index]
    assert evidence_span("clean:garbage", "ok \x00\x01 then") == (3, 4)
    assert evidence_span("dedup:exact_of", PROSE) is None


def test_clean_drops_show_the_incoming_text_and_what_cleaning_keeps() -> None:
    text = "Result:\x00\x01\x02\x03\x1b[31m\x04\x05\x06\x07 done"
    excerpt = make_excerpt("r", "clean:garbage", text, 300)
    assert excerpt.text == text and excerpt.evidence == (7, 8)
    assert excerpt.cleaned == "Result: done"
    assert make_excerpt("d", "dedup:exact_of:x", PROSE, 300).cleaned is None


def test_report_page_shows_the_run_and_the_bytes(tmp_path: Path) -> None:
    """A page dropped for a base64 blob after 600 good characters, and a garbage row: the page
    shows the blob (not the first 300 characters) and the control characters as marks."""
    blob = base64.encodebytes(bytes(range(256)) * 6).decode()
    rows = [
        {"id": "blob", "text": PROSE[:600] + "\n" + blob},
        {"id": "bytes", "text": "ok " + "\x00\x01\x02" * 20 + " end"},
    ]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    run_pipeline([str(source)], str(tmp_path / "out"), [CleanText()], LocalExecutor())
    report = build_report(str(tmp_path / "out"))
    [found] = report.excerpts["clean:encoded_data"]
    assert found.start > 0 and found.evidence is not None
    assert found.text is not None and found.text[found.evidence[0] :].startswith(blob[:24])
    [garbage] = report.excerpts["clean:garbage"]
    assert garbage.text == rows[1]["text"] and garbage.cleaned == "ok  end"
    page = render(report)
    assert '<mark><span class="ctl">U+0000</span></mark>' in page
    assert "as it came in" in page and "what cleaning keeps" in page and f"<mark>{blob[:24]}" in page


def test_report_totals_undecodable_bytes_and_stage_counts(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"id": "a", "text": "caf\xff\xfe au lait \\u001b[1mbold\\u001b[0m"}\n')
    run_pipeline([str(source)], str(tmp_path / "out"), [CleanText()], LocalExecutor())
    page = render(build_report(str(tmp_path / "out")))
    assert "<b>2</b><span>undecodable bytes</span>" in page
    assert "<b>2</b><span>clean: escape_sequences</span>" in page
