"""The decontaminate stage: eval questions and passages planted into real web and Chinese text,
whole and edited, are found and attributed to their item; clean text from other sources is not;
drop, remove and annotate; OUT/contamination.parquet; the same decisions on local and Ray."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.contamination.ngrams import ngram_hashes, tokens
from dataclean.contamination.removal import token_spans
from dataclean.dedup.shingles import normalize_text
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.run import run_pipeline
from dataclean.run.config import configure
from dataclean.stages.clean import CleanText
from dataclean.stages.decontaminate import DropContaminated
from tests.conftest import FIXTURE_ROOT, read_rows, sample_web_texts, write_jsonl

FIXTURES = FIXTURE_ROOT


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


CMRC = _lines(FIXTURES / "lm" / "cmrc2018_heldout_zh.txt")
WIKI = _lines(FIXTURES / "lm" / "wikitext2_test_en.txt")
NOVEL = _lines(FIXTURES / "decontaminate" / "hongloumeng_zh.txt")
GUTENBERG = _lines(FIXTURES / "decontaminate" / "gutenberg_en.txt")
WEB = [text for text in sample_web_texts() if len(text) > 400]


def _question(paragraph: str) -> str | None:
    """A 24-character question-like span: the start of the paragraph's first sentence with 20 or
    more Han characters in its first 24 (a Chinese question, not a Latin name in brackets)."""
    for sentence in re.split("[。！？]", paragraph):
        if len(re.findall(r"[\u4e00-\u9fff]", sentence[:24])) >= 20:
            return sentence[:24]
    return None


def _eval_sets(folder: Path) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """A Chinese QA set (JSONL: 24-character questions, one-character answers) and an English
    passage set (Parquet), both from real Wikipedia text; returns the `evals` setting too."""
    questions = [
        {"id": f"cmrc-{k}", "question": question, "answer": p[:1]}
        for k, p in enumerate(CMRC)
        if (question := _question(p)) is not None
    ]
    passages = [{"id": f"wiki-{k}", "passage": p[:700], "title": p.split(" ")[0]} for k, p in enumerate(WIKI)]
    write_jsonl(folder / "cmrc_questions.jsonl", questions)
    pq.write_table(pa.Table.from_pylist(passages), folder / "wiki_passages.parquet")
    evals = f"cmrc2018={folder / 'cmrc_questions.jsonl'},wikitext={folder / 'wiki_passages.parquet'}"
    return evals, questions, passages


def _stage(tmp_path: Path, evals: str, **settings: str) -> DropContaminated:
    stage = configure(DropContaminated(), {"evals": evals, **settings})
    assert isinstance(stage, DropContaminated)
    stage.prepare(str(tmp_path / "scratch"))
    return stage


def _edit_zh(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text))
    return text[:at] + "某" + text[at + 1 :]


def _edit_en(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    for _ in range(2):
        words[rng.randrange(len(words))] = "something"
    edited = " ".join(words)
    return edited.upper() if rng.random() < 0.3 else edited.replace(",", ";")


def _planted(questions: list[dict[str, Any]], passages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(row text, the eval item planted in it): every item whole and edited, in real hosts."""
    rng = random.Random(5)
    rows = []
    for number, item in enumerate(questions):
        for text in (item["question"], _edit_zh(item["question"], rng)):
            host = NOVEL[number % len(NOVEL)] if number % 3 else WEB[number % len(WEB)]  # some mixed
            cut = rng.randrange(len(host))
            rows.append((host[:cut] + text + host[cut:], item["id"]))
    for number, item in enumerate(passages[:120]):
        for text in (item["passage"], _edit_en(item["passage"], rng)):
            host = WEB[number % len(WEB)]
            cut = host.find(" ", rng.randrange(len(host))) + 1
            rows.append((host[:cut] + text + " " + host[cut:], item["id"]))
    return rows


def _annotate(stage: DropContaminated, texts: list[str]) -> pa.Table:
    table = pa.table({C.ID: [str(k) for k in range(len(texts))], C.TEXT: texts})
    return stage(table)


def test_planted_questions_and_passages_are_found_and_attributed(tmp_path: Path) -> None:
    evals, questions, passages = _eval_sets(tmp_path)
    stage = _stage(tmp_path, evals, mode="annotate")
    planted = _planted(questions, passages)
    out = _annotate(stage, [text for text, _ in planted])
    records = out.column(C.RECORDS).to_pylist()
    found = [bool(r) and r[0]["eval_item"] == item for r, (_, item) in zip(records, planted, strict=True)]
    zh = [ok for ok, (_, item) in zip(found, planted, strict=True) if item.startswith("cmrc")]
    en = [ok for ok, (_, item) in zip(found, planted, strict=True) if item.startswith("wiki")]
    assert len(zh) >= 140 and len(en) == 240
    assert sum(zh) / len(zh) >= 0.95, sum(zh) / len(zh)
    assert sum(en) / len(en) >= 0.95, sum(en) / len(en)
    sets = out.column(C.CONTAMINATED_BY).to_pylist()
    assert all(
        s and s.split(",")[0] == ("cmrc2018" if i.startswith("cmrc") else "wikitext")
        for s, (_, i), ok in zip(sets, planted, found, strict=True)
        if ok
    )


def test_clean_text_from_other_sources_is_not_flagged(tmp_path: Path) -> None:
    evals, _, _ = _eval_sets(tmp_path)
    stage = _stage(tmp_path, evals, mode="annotate")
    # Every web page, and every line of 100+ characters of them, as rows of their own.
    web_lines = [line for text in sample_web_texts() for line in text.splitlines() if len(line) >= 100]
    clean = sample_web_texts() + web_lines + NOVEL + GUTENBERG
    out = _annotate(stage, clean)
    flagged = [
        text[:80] for text, n in zip(clean, out.column(C.CONTAMINATION_NGRAMS).to_pylist(), strict=True) if n
    ]
    assert len(clean) > 1000
    assert len(flagged) <= 0.001 * len(clean), flagged


def test_fields_shorter_than_an_ngram_never_match_alone(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "q1", "question": "谁写了红楼梦", "answer": "曹雪芹"},
            {
                "id": "q2",
                "question": "Who wrote the novel Moby Dick and when was it first published?",
                "answer": "Melville",
            },
        ],
    )
    stage = _stage(tmp_path, f"qa={tmp_path / 'qa.jsonl'}", mode="annotate")
    rows = [
        "红楼梦的作者是曹雪芹，谁写了红楼梦这个问题很简单。",
        "Melville wrote it. Who wrote the novel Moby Dick and when",
    ]
    assert _annotate(stage, rows).column(C.CONTAMINATION_NGRAMS).to_pylist() == [0, 0]


def test_tokens_and_spans_agree_with_the_kernel() -> None:
    text = "The 2019 season of 红楼梦 (Dream of the Red Chamber)，曹雪芹著。 Version 3 — ok！"
    normalized = normalize_text(text)
    kernel = ngram_hashes([text], 3, 2)
    joined = ngram_hashes([" ".join(tokens(normalized))], 3, 2, normalized=True)
    assert kernel.hashes.tolist() == joined.hashes.tolist() and kernel.first.tolist() == joined.first.tolist()
    words, spans = token_spans(text)
    assert words == tokens(normalized)
    assert [normalize_text(text[a:b]) for a, b in spans] == words


def test_remove_mode_cuts_the_passage_with_its_margin(tmp_path: Path) -> None:
    evals, _, passages = _eval_sets(tmp_path)
    stage = _stage(tmp_path, evals, mode="remove")
    before, after = " ".join(GUTENBERG[:3]), " ".join(GUTENBERG[3:6])
    passage = passages[7]["passage"]
    rows = [before + " " + passage + " " + after, "Short host. " + passage]
    out = stage(pa.table({C.ID: ["long", "short"], C.TEXT: rows}))
    text, reason = out.column(C.TEXT)[0].as_py(), out.column(C.DROP_REASON).to_pylist()
    assert reason == [None, "wikitext"]  # nothing over 200 characters is left of the short row
    assert passage[30:-30] not in text
    assert text.startswith(before[: len(before) - 200]) and text.endswith(after[200:])
    assert (
        _annotate(_stage(tmp_path / "again", evals, mode="annotate"), [text])
        .column(C.CONTAMINATION_NGRAMS)[0]
        .as_py()
        == 0
    )


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="two eval sets named"):
        DropContaminated(evals=("a=x.jsonl", "a=y.jsonl"))
    with pytest.raises(ConfigError, match="mode"):
        configure(DropContaminated(), {"mode": "erase"})
    with pytest.raises(ConfigError, match="char_ngram"):
        DropContaminated(char_ngram=0)
    stage = DropContaminated()
    assert stage.provided_columns() == () and stage(pa.table({C.ID: ["a"], C.TEXT: ["x"]})).num_columns == 2


def _run(
    tmp_path: Path, executor: Any, name: str, evals: str, rows: list[str]
) -> tuple[list[Any], list[Any]]:
    source = write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"r{k}", "text": t} for k, t in enumerate(rows)])
    out = tmp_path / name
    stats = run_pipeline(
        [str(source)], str(out), [CleanText(), DropContaminated(evals=tuple(evals.split(",")))], executor
    )
    excluded = sorted((r[C.ID], r[C.REASON]) for r in read_rows(out / "excluded"))
    excluded = [(row_id, reason) for row_id, reason in excluded if reason.startswith("decontaminate:")]
    contamination = pq.read_table(out / "contamination.parquet").to_pylist()
    assert set(pq.read_schema(out / "contamination.parquet").names) == {
        "id",
        "eval_set",
        "eval_item",
        "matched_ngrams",
    }
    reasons = stats["reasons"]
    assert reasons.get("decontaminate:cmrc2018", 0) + reasons.get("decontaminate:wikitext", 0) == len(
        excluded
    )
    report = (out / "report.html").read_text()
    assert 'id="contamination"' in report and "cmrc2018" in report and "wikitext" in report
    return excluded, sorted(
        (r["id"], r["eval_set"], r["eval_item"], r["matched_ngrams"]) for r in contamination
    )


def test_drop_mode_on_local_and_ray_decides_the_same(tmp_path: Path, ray_executor: Any) -> None:
    evals, questions, passages = _eval_sets(tmp_path)
    planted = _planted(questions[:20], passages[:20])
    rows = [text for text, _ in planted] + WEB[:40] + NOVEL[:10]
    local = _run(tmp_path, LocalExecutor(), "local", evals, rows)
    remote = _run(tmp_path, ray_executor, "ray", evals, rows)
    assert local == remote
    excluded, contamination = local
    planted_ids = {f"r{k}": item for k, (_, item) in enumerate(planted)}
    cleaned = {r[C.ID] for r in read_rows(tmp_path / "local" / "excluded") if r[C.STAGE] == "clean"}
    dropped, expected = {row_id for row_id, _ in excluded}, set(planted_ids) - cleaned
    assert dropped <= expected and len(dropped) >= 0.95 * len(expected)  # recall, as planted above
    assert len(excluded) >= 70
    assert {(row_id, item) for row_id, _, item, _ in contamination} >= {
        (row_id, item) for row_id, item in planted_ids.items() if row_id in dropped
    }


def test_hugging_face_saved_dataset_is_an_eval_set(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    items = {"id": ["h1", "h2"], "question": [q for q in map(_question, CMRC) if q][:2]}
    datasets.DatasetDict({"test": datasets.Dataset.from_dict(items)}).save_to_disk(str(tmp_path / "hf_qa"))
    stage = _stage(tmp_path, str(tmp_path / "hf_qa"), mode="annotate")
    out = _annotate(stage, ["前言。" + items["question"][1] + "。后记"])
    every = len(ngram_hashes([items["question"][1]], 13, 10).hashes)  # all of the question's n-grams
    assert out.column(C.RECORDS).to_pylist()[0] == [
        {"eval_set": "hf_qa", "eval_item": "h2", "matched_ngrams": every}
    ]
    assert json.loads(json.dumps(stage.summary.items)) == {"hf_qa": 2}  # type: ignore[union-attr]


def test_jsonl_lines_end_at_newlines_only(tmp_path: Path) -> None:
    question = next(q for q in map(_question, CMRC) if q)
    (tmp_path / "qa.jsonl").write_text(
        json.dumps({"id": "a", "note": "line\u2028separator"}, ensure_ascii=False)
        + "\n"
        + json.dumps({"id": "b", "question": question}, ensure_ascii=False)
        + "\n"
    )
    stage = _stage(tmp_path, f"qa={tmp_path / 'qa.jsonl'}", mode="annotate")
    assert stage.summary is not None and stage.summary.items == {"qa": 2}
    assert _annotate(stage, [question]).column(C.RECORDS).to_pylist()[0][0]["eval_item"] == "b"
