"""`dataclean export pack|megatron`: the exporters, one command family (docs/megatron.md, docs/pack.md).

`dataclean export pack` is `dataclean pack` itself (the same command object); `dataclean export
megatron OUT -o PREFIX --tokenizer TOK` writes Megatron-LM's IndexedDataset with sample ids.
"""

from __future__ import annotations

import click

from dataclean.executors import make_executor
from dataclean.export.megatron.run import export_megatron
from dataclean.export.progress import ExportProgress, Lines, Silent
from dataclean.export.tokenizer import PackTokenizer
from dataclean.pack.cli import pack


@click.group("export")
def export() -> None:
    """Turn a run's kept rows into what trainers read, every sample's id kept."""


export.add_command(pack)


@export.command("megatron")
@click.argument("run_folder", metavar="OUT")
@click.option(
    "-o", "--output", "prefix", required=True, metavar="PREFIX", help="Writes PREFIX.bin/.idx/.ids.parquet."
)
@click.option(
    "--tokenizer",
    "tokenizer_spec",
    required=True,
    metavar="TOK",
    help="A Hugging Face tokenizer.json (path or URI), or 'bytes' (UTF-8 bytes 0-255, end of document 256).",
)
@click.option("--eos-token", default=None, help="End-of-document token (default: <|endoftext|>, </s>, ...).")
@click.option(
    "--quarantine",
    "quarantine_list",
    default=None,
    metavar="LIST",
    help="Leave out the samples a quarantine list drops (counted); down-weighted ones keep a lower weight.",
)
@click.option(
    "--per-shard", is_flag=True, help="One prefix per input file (PREFIX_NNNNN), listed in PREFIX.json."
)
@click.option("--executor", type=click.Choice(["ray", "local"]), default="ray", show_default=True)
@click.option("--address", default=None, help="Ray cluster address (default: embedded local Ray).")
@click.option("--workers", type=int, default=None, help="Parallel workers (default: all CPUs).")
@click.option("--overwrite", is_flag=True, help="Replace an export made with other inputs or settings.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def megatron(
    run_folder: str,
    prefix: str,
    tokenizer_spec: str,
    eos_token: str | None,
    quarantine_list: str | None,
    per_shard: bool,
    executor: str,
    address: str | None,
    workers: int | None,
    overwrite: bool,
    quiet: bool,
) -> None:
    """Tokenize OUT's kept rows into Megatron-LM's IndexedDataset (PREFIX.bin/.idx) with sample ids."""
    tokenizer = PackTokenizer(tokenizer_spec, eos_token)
    progress: ExportProgress = Silent() if quiet else Lines("export megatron")
    engine = make_executor(executor, address, workers)
    try:
        summary = export_megatron(
            run_folder,
            prefix,
            tokenizer,
            engine,
            quarantine=quarantine_list,
            per_shard=per_shard,
            overwrite=overwrite,
            progress=progress,
        )
    finally:
        engine.close()
    where = (
        f"{len(summary['prefixes'])} prefixes listed in {prefix}.json" if per_shard else f"{prefix}.bin/.idx"
    )
    click.echo(
        f"wrote {where}: {summary['documents']:,} documents, {summary['tokens']:,} tokens "
        f"({summary['dtype']}), {summary['quarantined']:,} quarantined; ids in .ids.parquet"
    )
    click.echo(f"Megatron-LM: --data-path {summary['data_path'] if per_shard else prefix}")
