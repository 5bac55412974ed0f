"""Tokenize a run's kept rows and pack whole samples into fixed-length training sequences.

`dataclean pack OUT -o PACKED --tokenizer TOK --seq-len N` (docs/pack.md): `tokenizer` (the byte
tokenizer and Hugging Face tokenizer.json files), `encode` (one job per input file), `packer`
(best-fit decreasing over the whole corpus), `write` (spans to sequences, one job per output
file), `run` (the three maps and pack.json), `cli`.
"""
