"""Decontamination against evaluation sets: the machinery behind the decontaminate stage.

- `evalsets`: naming and reading eval sets (JSONL, Parquet, Hugging Face `save_to_disk`).
- `ngrams`: word and character n-gram hashes of normalized text (a batch kernel).
- `index`: the eval sets' n-gram index, built once per run, and the lookup of a batch.
- `removal`: cutting matched spans out of a text with GPT-3's margin.
"""
