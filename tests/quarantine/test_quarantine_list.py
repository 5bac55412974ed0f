"""The quarantine list: schema, defaults, merge without duplicates, idempotence."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.errors import InputError
from dataclean.quarantine.lists import make_list, merge_lists, read_list, write_list
from dataclean.quarantine.schema import QUARANTINE_SCHEMA

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T1 = datetime(2026, 2, 1, tzinfo=timezone.utc)


def entries():
    first = make_list(
        [
            {
                "sample_id": "a",
                "reason": "loss_outlier",
                "score": 5.0,
                "first_step": 10,
                "last_step": 90,
                "occurrences": 2,
                "source": "run1",
                "added_at": T0,
            },
            {
                "sample_id": "b",
                "reason": "spike:40",
                "score": 8.0,
                "first_step": 40,
                "last_step": 40,
                "occurrences": 1,
                "action": "downweight",
                "weight": 0.2,
                "source": "run1",
                "added_at": T0,
            },
        ]
    )
    second = make_list(
        [
            {
                "sample_id": "a",
                "reason": "spike:300",
                "score": 9.0,
                "first_step": 5,
                "last_step": 300,
                "occurrences": 3,
                "source": "run2",
                "added_at": T1,
                "text_hash": "h-a",
            },
            {"sample_id": "b", "action": "drop", "source": "run2", "added_at": T1},
            {"sample_id": "c", "reason": "nonfinite_loss", "source": "run2", "added_at": T1},
        ]
    )
    return first, second


def test_schema_and_defaults():
    first, _ = entries()
    assert first.schema == QUARANTINE_SCHEMA
    assert first.schema.names[:11] == [
        "sample_id",
        "text_hash",
        "reason",
        "score",
        "first_step",
        "last_step",
        "occurrences",
        "action",
        "weight",
        "source",
        "added_at",
    ]
    rows = {r["sample_id"]: r for r in first.to_pylist()}
    assert rows["a"]["action"] == "drop" and rows["a"]["weight"] == 0.0
    assert rows["b"]["action"] == "downweight" and rows["b"]["weight"] == 0.2


def test_merge_has_no_duplicates_and_combines_fields():
    first, second = entries()
    merged = merge_lists(first, second)
    rows = {r["sample_id"]: r for r in merged.to_pylist()}
    assert merged.column("sample_id").to_pylist() == ["a", "b", "c"]
    assert rows["a"]["reason"] == "loss_outlier"  # first reason kept
    assert rows["a"]["text_hash"] == "h-a"
    assert (rows["a"]["first_step"], rows["a"]["last_step"]) == (5, 300)
    assert rows["a"]["occurrences"] == 3 and rows["a"]["score"] == 9.0
    assert rows["a"]["source"] == "run1,run2"
    assert rows["a"]["added_at"] == T0
    assert rows["b"]["action"] == "drop" and rows["b"]["weight"] == 0.0  # strictest wins


def test_merge_is_idempotent():
    first, second = entries()
    merged = merge_lists(first, second)
    assert merge_lists(merged, second).equals(merged)
    assert merge_lists(merged, merged).equals(merged)
    assert merge_lists(first, first).equals(first)


def test_write_read_round_trip_and_foreign_lists(tmp_path):
    first, second = entries()
    write_list(merge_lists(first, second), tmp_path / "q.parquet")
    assert read_list(tmp_path / "q.parquet").equals(merge_lists(first, second))
    # A hand-made list with only ids (and a string timestamp) is accepted.
    pq.write_table(
        pa.table({"sample_id": ["x", "x", "y"], "added_at": ["2026-01-01T00:00:00+00:00"] * 3}),
        tmp_path / "hand.parquet",
    )
    hand = read_list(tmp_path / "hand.parquet")
    assert hand.column("sample_id").to_pylist() == ["x", "y"]
    pq.write_table(pa.table({"id": ["x"]}), tmp_path / "wrong.parquet")
    with pytest.raises(InputError, match="not a quarantine list"):
        read_list(tmp_path / "wrong.parquet")


def test_unknown_action_is_refused():
    with pytest.raises(ValueError, match="action"):
        make_list([{"sample_id": "a", "action": "delete"}])
