"""Arrow schemas of the training logs (docs/contracts.md, "Training feedback"); the column names
are `dataclean.columns`'. The quarantine list's schema is `dataclean.quarantine.schema`'s.

- per-sample loss log: `sample_id`, `loss`, optional `step`, `epoch`, `rank`, `tokens`;
- step log: `step`, `loss`, optional `lr`, `grad_norm`, `loss_scale`.
"""

from __future__ import annotations

import pyarrow as pa

from dataclean import columns as C

LOSS_LOG_SCHEMA = pa.schema(
    [
        (C.SAMPLE_ID, pa.string()),
        (C.LOSS, pa.float64()),
        (C.STEP, pa.int64()),
        (C.EPOCH, pa.int64()),
        (C.RANK, pa.int64()),
        (C.TOKENS, pa.int64()),
    ]
)
LOSS_LOG_REQUIRED = (C.SAMPLE_ID, C.LOSS)

STEP_LOG_SCHEMA = pa.schema(
    [
        (C.STEP, pa.int64()),
        (C.LOSS, pa.float64()),
        (C.LR, pa.float64()),
        (C.GRAD_NORM, pa.float64()),
        (C.LOSS_SCALE, pa.float64()),
    ]
)
STEP_LOG_REQUIRED = (C.STEP, C.LOSS)
