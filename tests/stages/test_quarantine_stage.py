"""The quarantine stage: drops exactly the listed ids, hashes and near-duplicates; down-weights."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.ids import text_hash
from dataclean.quarantine.lists import make_list, write_list
from dataclean.quarantine.neardup import NearDuplicateIndex, shingle_hashes
from dataclean.stage import FitContext
from dataclean.stages.quarantine import DropQuarantined
from tests.conftest import FIXTURE_ROOT

FIXTURE = FIXTURE_ROOT / "feedback" / "paragraphs.jsonl"


def corpus() -> pa.Table:
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    return pa.Table.from_pylist(rows)


def edited(text: str) -> str:
    """The same text with two words changed: a near-duplicate."""
    words = text.split(" ")
    words[3], words[-4] = "quite", "indeed"
    return " ".join(words)


def run_stage(stage: DropQuarantined, table: pa.Table, tmp_path: Path) -> pa.Table:
    """What the runner does for a global stage: observe, fit on the summaries, then apply."""
    summaries = []
    for i, batch in enumerate([table.slice(0, 20), table.slice(20)]):
        summary = stage.observe(batch)
        if summary is not None:
            path = tmp_path / f"summary-{i}.parquet"
            pq.write_table(summary, path)
            summaries.append(str(path))
    stage.fit(FitContext(summaries=summaries, scratch=str(tmp_path), executor=LocalExecutor()))
    return stage(table)


def dropped(table: pa.Table) -> dict[str, str]:
    reasons = table.column(C.DROP_REASON).to_pylist()
    return {i: r for i, r in zip(table.column(C.ID).to_pylist(), reasons, strict=True) if r is not None}


def test_drops_listed_ids_by_hash_and_near_duplicates(tmp_path):
    table = corpus()
    texts = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))
    extra = pa.table(
        {
            "id": ["renamed", "near-en", "near-zh", "unrelated"],
            "text": [
                texts["en-005"],  # en-005's text under a new id: matched by text_hash
                edited(texts["en-001"]),  # near-duplicate of a listed sample in this run
                texts["zh-002"][:-3] + "。",  # near-duplicate of a listed Chinese sample
                "A wholly different sentence about ships and the sea, long enough to shingle.",
            ],
        }
    )
    table = pa.concat_tables([table, extra])
    listed = make_list(
        [
            {"sample_id": "en-001", "reason": "loss_outlier"},
            {"sample_id": "zh-002", "reason": "spike:12"},
            {
                "sample_id": "gone",
                "text_hash": text_hash(texts["en-005"]),
                "reason": "loss_outlier",
            },
        ]
    )
    write_list(listed, tmp_path / "q.parquet")
    result = run_stage(DropQuarantined(path=str(tmp_path / "q.parquet")), table, tmp_path)
    assert dropped(result) == {
        "en-001": "loss_outlier",
        "zh-002": "spike:12",
        "en-005": "loss_outlier",
        "renamed": "loss_outlier",
        "near-en": "near_duplicate_of:en-001",
        "near-zh": "near_duplicate_of:zh-002",
    }
    assert result.num_rows == table.num_rows


def test_texts_in_the_list_catch_near_duplicates_whose_original_is_gone(tmp_path):
    table = corpus()
    original = table.column("text")[7].as_py()
    listed = make_list([{"sample_id": "old-7", "reason": "loss_outlier", "text": original}])
    write_list(listed, tmp_path / "q.parquet")
    fresh = pa.table({"id": ["new-7", "other"], "text": [edited(original), table["text"][9]]})
    stage = DropQuarantined(path=str(tmp_path / "q.parquet"))
    assert dropped(stage(fresh)) == {"new-7": "near_duplicate_of:old-7"}
    off = DropQuarantined(path=str(tmp_path / "q.parquet"), near_duplicates=False)
    assert dropped(off(fresh)) == {}


def test_downweight_keeps_the_row_with_a_lower_weight_and_is_idempotent(tmp_path):
    table = corpus().slice(0, 5)
    listed = make_list([{"sample_id": "en-002", "action": "downweight", "weight": 0.25}])
    write_list(listed, tmp_path / "q.parquet")
    stage = DropQuarantined(path=str(tmp_path / "q.parquet"))
    once = stage(table)
    assert dropped(once) == {}
    assert once.column(C.WEIGHT).to_pylist() == [1.0, 1.0, 0.25, 1.0, 1.0]
    twice = stage(once.drop_columns([C.DROP_REASON]))
    assert twice.column(C.WEIGHT).to_pylist() == once.column(C.WEIGHT).to_pylist()


def test_applying_a_list_twice_changes_nothing(tmp_path):
    table = corpus()
    write_list(make_list([{"sample_id": "en-003"}]), tmp_path / "q.parquet")
    stage = DropQuarantined(path=str(tmp_path / "q.parquet"))
    first = stage(table)
    kept = first.filter(pc.is_null(first.column(C.DROP_REASON))).drop_columns([C.DROP_REASON])
    second = stage(kept)
    assert dropped(second) == {} and second.num_rows == kept.num_rows


def test_no_list_is_a_no_op(tmp_path):
    table = corpus()
    stage = DropQuarantined()
    assert stage.observe(table) is None
    assert run_stage(stage, table, tmp_path).equals(table)


def test_parameters_are_validated():
    with pytest.raises(ConfigError, match="threshold"):
        DropQuarantined(threshold=1.5)


def test_near_duplicate_index_finds_edits_not_neighbours():
    texts = corpus().column("text").to_pylist()
    index = NearDuplicateIndex(threshold=0.8)
    for number, text in enumerate(texts[:20]):
        index.add(f"q{number}", text)
    found = index.query(edited(texts[3]))
    assert found is not None and found[0] == "q3" and 0.8 <= found[1] < 1.0
    assert index.query(texts[3]) == ("q3", 1.0)
    assert all(index.query(text) is None for text in texts[20:])
    assert index.query("") is None and index.query("short") is None


def test_shingles_ignore_case_and_spacing():
    assert shingle_hashes("Hello   World").tolist() == shingle_hashes("hello world").tolist()
    assert len(shingle_hashes("abc")) == 1 and len(shingle_hashes("")) == 0
    assert len(shingle_hashes("红楼梦是一部小说")) == 4
