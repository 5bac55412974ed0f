"""The quarantine list: its schema, read/merge/write (`lists`), and how a row matches an entry
(`match`), one rule for the pipeline's quarantine stage and the training-time sampler alike."""
