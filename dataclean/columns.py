"""Column names of the dataclean row contract (see docs/contracts.md, "Rows and columns").

Every stage and writer refers to columns through these constants, so a rename is one edit.
"""

from __future__ import annotations

ID = "id"
TEXT = "text"
PARENT_ID = "parent_id"
LANG = "lang"
LANG_SCORE = "lang_score"
TEXT_HASH = "text_hash"
PPL = "ppl"
PPL_BUCKET = "ppl_bucket"
DUP_CLUSTER = "dup_cluster"
DUP_SCORE = "dup_jaccard"
WEIGHT = "weight"
# A row's sampling weight when nothing lowered it (the quarantine list's `downweight` entries do).
DEFAULT_WEIGHT = 1.0
# Added by the classify stage: `quality_<name>` per classifier, and its corpus bucket (0-19).
QUALITY_PREFIX = "quality_"
QUALITY_BUCKET = "quality_bucket"

# Only in the excluded/ and quarantined/ outputs.
STAGE = "stage"
REASON = "reason"
# Only in quarantined/: what the quarantine list did to the row. `drop`: the row is not in data/;
# `downweight`: a copy, the row itself is in data/ with its lowered weight.
ACTION = "action"

# Added by the reader: undecodable bytes removed from the row's text.
BAD_BYTES = "bad_bytes"
# Added by the clean stage: characters removed or replaced by clean_text.
REMOVED_CHARS = "clean_removed_chars"
# Added by the pii stage: personal-data spans replaced with placeholders in the row.
PII_REDACTED = "pii_redacted"
# Added by the decontaminate stage: n-grams the row shares with the eval sets (0 when clean), and
# the eval sets they come from, most matched first, comma-separated (null when clean).
CONTAMINATION_NGRAMS = "contamination_ngrams"
CONTAMINATED_BY = "contaminated_by"
# Added by the quality stage in annotate mode: every rule's statistic, one struct per row.
QUALITY_SIGNALS = "quality_signals"
# Added by the quality stage in filter mode: long n-gram runs cut back in the row's text.
QUALITY_RUNS_CUT = "quality_runs_cut"
# Added by the quality stage: the row's language has no table of its own (no FineWeb-2 config), so
# only the language-independent rules judged it.
QUALITY_UNCONFIGURED = "quality_unconfigured"

# Private: a stage marks a row for dropping by putting its reason here (null keeps the row).
# The runner removes this column before anything is written.
DROP_REASON = "__drop_reason"
# Private: per-row counts of what a stage did (`__count_{what}`, e.g. escape sequences removed),
# which the runner totals into the stage's stats (`counts`) and removes before anything is written.
COUNT_PREFIX = "__count_"
# Private: a stage lists a row it keeps in its destination folder too (a copy) with a reason here.
COPY_REASON = "__copy_reason"
# Private: rows a stage records about each row for its OUT/ records file (`with_records`): a list
# of structs per row; the runner writes them with the row's id and removes the column.
RECORDS = "__records"

# The training-feedback files (docs/contracts.md, "Training feedback"): the per-sample loss log
# (`sample_id`, `loss`, optional `step`, `epoch`, `rank`, `tokens`), the step log (`step`, `loss`,
# optional `lr`, `grad_norm`, `loss_scale`) and the quarantine list (`sample_id`, `text_hash`,
# `reason`, `score`, `first_step`, `last_step`, `occurrences`, `action`, `weight`, `source`,
# `added_at`, `text`). A sample id is a corpus row's `id`.
SAMPLE_ID = "sample_id"
LOSS = "loss"
STEP = "step"
EPOCH = "epoch"
RANK = "rank"
TOKENS = "tokens"
LR = "lr"
GRAD_NORM = "grad_norm"
LOSS_SCALE = "loss_scale"
SCORE = "score"
FIRST_STEP = "first_step"
LAST_STEP = "last_step"
OCCURRENCES = "occurrences"
SOURCE = "source"
# An input column naming each row's site or domain; with `source`, what dedup's alarms count by.
DOMAIN = "domain"
ADDED_AT = "added_at"

# Contract columns first, in this order, in every output file.
LEADING = (ID, TEXT, PARENT_ID, LANG, LANG_SCORE, TEXT_HASH, WEIGHT, DUP_CLUSTER, PPL, PPL_BUCKET)
