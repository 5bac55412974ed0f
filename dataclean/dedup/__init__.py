"""Exact and near-duplicate detection at corpus scale: the machinery behind the dedup stage.

- `shingles`: text normalization, word/character shingles and their hashes (batch kernels).
- `minhash`: MinHash signatures equal to datasketch's, LSH band keys.
- `lsh`: choosing bands and rows for recall.
- `summary`: the per-row summaries `observe` returns.
- `partition`, `connect`, `verify`, `reduce`: the distributed `fit` (shuffle to edges,
  connected components in rounds on the executor, per-cluster decisions); `components`: the
  union-find the rounds replaced, kept as the tests' reference;
  `sets`: shingle sets, their similarity and prefixes; `alarms`: largest clusters, per-source
  shares, warnings.
- `decisions`: looking decisions up by id when the stage is applied.
- `index`: summaries of an earlier output, to dedup later corpora against it.
"""
