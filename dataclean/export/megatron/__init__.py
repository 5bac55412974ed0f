"""Megatron-LM: the exporter to its IndexedDataset and the tools on what it trains from.

`dataclean export megatron` (`run`, `shards`, `indexed`, `ids`) writes `PREFIX.bin/.idx` with
`PREFIX.ids.parquet`; `dataclean megatron locate` (`cache`, `locate`) names the documents of any
iteration from the index files Megatron's GPTDataset and BlendedDataset saved;
`dataclean megatron filter` (`filter`) copies a prefix without the documents a quarantine list
names. docs/megatron.md has the formats and the index arithmetic.
"""
