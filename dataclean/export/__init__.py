"""Exporters: a run's kept rows turned into what trainers read, every sample's id kept.

Two exporters share one seam: reading the kept rows file by file with the quarantine list applied
and counted (`source`), tokenizing them into documents that end with the end-of-sample id
(`tokenizer`) and reporting progress per input file (`progress`). `dataclean pack`
(`dataclean.pack`: whole samples best-fit packed into fixed-length Parquet sequences) and
`dataclean export megatron` (`dataclean.export.megatron`: Megatron-LM's IndexedDataset
`.bin/.idx` plus an ids file) are built on it; `dataclean export pack` is the same command as
`dataclean pack`.
"""
