"""`dataclean pack OUT -o PACKED --tokenizer TOK --seq-len N`: training sequences from a run."""

from __future__ import annotations

import click

from dataclean.executors import make_executor
from dataclean.export.progress import Lines, Silent
from dataclean.pack.run import ROWS_PER_FILE, pack_corpus
from dataclean.pack.tokenizer import PackTokenizer


@click.command("pack")
@click.argument("run_folder", metavar="OUT")
@click.option("-o", "--output", required=True, help="Folder for the packed sequences (PACKED).")
@click.option(
    "--tokenizer",
    "tokenizer_spec",
    required=True,
    metavar="TOK",
    help="A Hugging Face tokenizer.json (path or URI), or 'bytes' (UTF-8 bytes 0-255, "
    "end-of-sample 256, padding 257).",
)
@click.option("--seq-len", type=int, required=True, help="Tokens per sequence, e.g. 2048.")
@click.option("--eos-token", default=None, help="End-of-sample token (default: <|endoftext|>, </s>, ...).")
@click.option("--pad-token", default=None, help="Padding token (default: <pad>, ..., else end-of-sample).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sequence shuffle.")
@click.option("--no-shuffle", is_flag=True, help="Keep sequences in packing order.")
@click.option(
    "--quarantine",
    "quarantine_list",
    default=None,
    metavar="LIST",
    help="Leave out (or down-weight) the samples a quarantine list names, and repack.",
)
@click.option("--executor", type=click.Choice(["ray", "local"]), default="ray", show_default=True)
@click.option("--address", default=None, help="Ray cluster address (default: embedded local Ray).")
@click.option("--workers", type=int, default=None, help="Parallel workers (default: all CPUs).")
@click.option("--rows-per-file", type=int, default=ROWS_PER_FILE, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace an existing PACKED folder.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def pack(
    run_folder: str,
    output: str,
    tokenizer_spec: str,
    seq_len: int,
    eos_token: str | None,
    pad_token: str | None,
    seed: int,
    no_shuffle: bool,
    quarantine_list: str | None,
    executor: str,
    address: str | None,
    workers: int | None,
    rows_per_file: int,
    overwrite: bool,
    quiet: bool,
) -> None:
    """Tokenize OUT's kept rows and pack whole samples into sequences of exactly --seq-len tokens."""
    tokenizer = PackTokenizer(tokenizer_spec, eos_token, pad_token)
    engine = make_executor(executor, address, workers)
    try:
        summary = pack_corpus(
            run_folder,
            output,
            tokenizer,
            seq_len,
            engine,
            seed=None if no_shuffle else seed,
            quarantine=quarantine_list,
            rows_per_file=rows_per_file,
            overwrite=overwrite,
            progress=Silent() if quiet else Lines("pack"),
        )
    finally:
        engine.close()
    click.echo(
        f"wrote {output}: {summary['samples']:,} samples, {summary['tokens']:,} tokens in "
        f"{summary['sequences']:,} sequences of {seq_len} (padding {summary['padding_fraction']:.2%}"
        f", {summary['split_samples']:,} samples split, {summary['quarantined']:,} quarantined)"
    )
    if summary["split_samples"]:
        click.echo(
            f"note: {summary['split_samples']:,} samples are longer than {seq_len} tokens and were cut into "
            f"pieces; `dataclean run --set split.max_tokens=...` splits them on sentence boundaries instead",
            err=True,
        )
