"""Column names and Arrow schemas of the training-feedback files (docs/contracts.md, "Training feedback").

- per-sample loss log: `sample_id`, `loss`, optional `step`, `epoch`, `rank`, `tokens`;
- step log: `step`, `loss`, optional `lr`, `grad_norm`, `loss_scale`;
- quarantine list: `sample_id`, `text_hash`, `reason`, `score`, `first_step`, `last_step`,
  `occurrences`, `action`, `weight`, `source`, `added_at`, then an optional `text` (the sample's
  text when it was known, so near-duplicates of it can be found even after its id and hash change).
"""

from __future__ import annotations

import pyarrow as pa

SAMPLE_ID = "sample_id"
LOSS = "loss"
STEP = "step"
EPOCH = "epoch"
RANK = "rank"
TOKENS = "tokens"

LR = "lr"
GRAD_NORM = "grad_norm"
LOSS_SCALE = "loss_scale"

TEXT_HASH = "text_hash"
REASON = "reason"
SCORE = "score"
FIRST_STEP = "first_step"
LAST_STEP = "last_step"
OCCURRENCES = "occurrences"
ACTION = "action"
WEIGHT = "weight"
SOURCE = "source"
ADDED_AT = "added_at"
TEXT = "text"

ACTIONS = ("drop", "downweight", "review")  # review: listed for a person, applied once accepted

LOSS_LOG_SCHEMA = pa.schema(
    [
        (SAMPLE_ID, pa.string()),
        (LOSS, pa.float64()),
        (STEP, pa.int64()),
        (EPOCH, pa.int64()),
        (RANK, pa.int64()),
        (TOKENS, pa.int64()),
    ]
)
LOSS_LOG_REQUIRED = (SAMPLE_ID, LOSS)

STEP_LOG_SCHEMA = pa.schema(
    [
        (STEP, pa.int64()),
        (LOSS, pa.float64()),
        (LR, pa.float64()),
        (GRAD_NORM, pa.float64()),
        (LOSS_SCALE, pa.float64()),
    ]
)
STEP_LOG_REQUIRED = (STEP, LOSS)

QUARANTINE_SCHEMA = pa.schema(
    [
        (SAMPLE_ID, pa.string()),
        (TEXT_HASH, pa.string()),
        (REASON, pa.string()),
        (SCORE, pa.float64()),
        (FIRST_STEP, pa.int64()),
        (LAST_STEP, pa.int64()),
        (OCCURRENCES, pa.int64()),
        (ACTION, pa.string()),
        (WEIGHT, pa.float64()),
        (SOURCE, pa.string()),
        (ADDED_AT, pa.timestamp("s", tz="UTC")),
        (TEXT, pa.string()),
    ]
)
