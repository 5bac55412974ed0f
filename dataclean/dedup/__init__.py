"""Exact and near-duplicate detection at corpus scale: the machinery behind the dedup stage.

- `shingles`: text normalization, word/character shingles and their hashes (batch kernels).
- `minhash`: MinHash signatures equal to datasketch's, LSH band keys.
- `lsh`: choosing bands and rows for recall.
- `summary`: the per-row summaries `observe` returns.
- `partition`, `components`, `verify`, `reduce`: the distributed `fit` (shuffle to edges,
  union-find, per-cluster decisions).
- `decisions`: looking decisions up by id when the stage is applied.
- `index`: summaries of an earlier output, to dedup later corpora against it.
"""
