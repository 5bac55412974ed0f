"""The quarantine list's Arrow schema and its actions (docs/contracts.md, "Quarantine list").

One row per listed sample: `sample_id`, `text_hash`, `reason`, `score`, `first_step`, `last_step`,
`occurrences`, `action`, `weight`, `source`, `added_at`, then an optional `text` (the sample's text
when it was known, so near-duplicates of it can be found even after its id and hash change).
"""

from __future__ import annotations

import pyarrow as pa

from dataclean import columns as C

# `drop`: the row leaves the corpus; `downweight`: it stays with its loss weight lowered;
# `review`: listed for a person, applied once accepted (`dataclean feedback accept`).
QUARANTINE_ACTIONS = ("drop", "downweight", "review")
# The weight of a `downweight` entry that does not give one (everywhere a list is applied).
DEFAULT_DOWNWEIGHT = 0.1

QUARANTINE_SCHEMA = pa.schema(
    [
        (C.SAMPLE_ID, pa.string()),
        (C.TEXT_HASH, pa.string()),
        (C.REASON, pa.string()),
        (C.SCORE, pa.float64()),
        (C.FIRST_STEP, pa.int64()),
        (C.LAST_STEP, pa.int64()),
        (C.OCCURRENCES, pa.int64()),
        (C.ACTION, pa.string()),
        (C.WEIGHT, pa.float64()),
        (C.SOURCE, pa.string()),
        (C.ADDED_AT, pa.timestamp("s", tz="UTC")),
        (C.TEXT, pa.string()),
    ]
)
