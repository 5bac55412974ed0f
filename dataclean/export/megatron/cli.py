"""`dataclean megatron locate|filter`: the documents of an iteration, and a prefix without a list's."""

from __future__ import annotations

import dataclasses
import functools
import json
import shlex
from pathlib import Path
from typing import Any

import click

from dataclean.errors import ConfigError
from dataclean.export.megatron.cache import Settings, load_cache, parse_data_path
from dataclean.export.megatron.filter import filter_prefix
from dataclean.export.megatron.locate import Batching, LocatedSample, Locator, TokenizerDecoder, decode_bytes
from dataclean.export.tokenizer import BYTES, PackTokenizer
from dataclean.io.files import read_parquet, write_parquet
from dataclean.quarantine.lists import write_list

TEXT_SHOWN = 100


@click.group("megatron")
def megatron() -> None:
    """Megatron-LM: name the documents of any iteration, filter a prefix by a quarantine list."""


def _iterations(iteration: int | None, span: str | None) -> list[int]:
    if (iteration is None) == (span is None):
        raise ConfigError("give one of --iteration I or --iterations A-B")
    if iteration is not None:
        return [iteration]
    try:
        first, last = (int(part) for part in str(span).split("-", 1))
    except ValueError as error:
        raise ConfigError(f"--iterations: expected A-B, got {span!r}") from error
    if first < 1 or last < first:
        raise ConfigError(f"--iterations: expected 1 <= A <= B, got {span!r}")
    return list(range(first, last + 1))


def _shown(text: str | None) -> str:
    if text is None:
        return ""
    flat = text.replace("\n", "\\n")
    return repr(flat if len(flat) <= TEXT_SHOWN else flat[: TEXT_SHOWN - 3] + "...")


def _print(sample: LocatedSample) -> None:
    click.echo(
        f"iteration {sample.iteration}  global sample {sample.global_sample}  rank {sample.rank}  "
        f"micro-batch {sample.micro_batch}  row {sample.row}  dataset {sample.dataset} ({sample.prefix}) "
        f"sample {sample.dataset_sample}"
    )
    for span in sample.spans:
        end = span.sample_offset + span.length
        click.echo(
            f"  [{span.sample_offset}:{end}) id {span.id}  document {span.document}  tokens "
            f"{span.document_offset}-{span.document_offset + span.length}  {_shown(span.text)}"
        )


@dataclasses.dataclass(frozen=True)
class DataArgs:
    """Which data a Megatron run read and how it batched it: the options locate, losses and
    suspects share (`_data_options` collects them into one of these)."""

    data_path: tuple[str, ...]
    cache_dir: str
    seq_length: int
    global_batch_size: int
    micro_batch_size: int | None
    dp_size: int
    split_string: str | None
    seed: int | None
    train_samples: int | None


def _data_options(command: Any) -> Any:
    """The options that say which data a run read and how it batched it, handed to the command
    as one `DataArgs` (its `data` parameter)."""
    options = [
        click.option(
            "--data-path",
            "data_path",
            multiple=True,
            required=True,
            help="As given to Megatron: 'PREFIX' or 'W1 PREFIX1 W2 PREFIX2 ...' (quoted, or repeated).",
        ),
        click.option("--cache-dir", required=True, help="Megatron's --data-cache-path (its .npy indices)."),
        click.option("--seq-length", type=int, required=True),
        click.option("--global-batch-size", type=int, required=True),
        click.option("--micro-batch-size", type=int, default=None, help="Default: global batch / dp size."),
        click.option("--dp-size", type=int, default=1, show_default=True, help="Data-parallel size."),
        click.option(
            "--split", "split_string", default=None, help="Megatron's --split, to tell caches apart."
        ),
        click.option("--seed", type=int, default=None, help="Megatron's --seed (default: any)."),
        click.option(
            "--train-samples", type=int, default=None, help="To tell apart caches of other run lengths."
        ),
    ]

    @functools.wraps(command)
    def with_data(**values: Any) -> Any:
        names = [field.name for field in dataclasses.fields(DataArgs)]
        data = DataArgs(**{name: values.pop(name) for name in names})
        return command(data=data, **values)

    wrapped: Any = with_data
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


def parse_data_args(value: str) -> DataArgs:
    """The data options as one string (`dataclean feedback --megatron`), or `@FILE` for a file
    holding them (quoted as in a shell; `#` starts a comment), parsed by the very option
    definitions locate uses, so the two never differ."""
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"--megatron {value}: {error.strerror or error}") from None
    try:
        words = shlex.split(value, comments=True)
    except ValueError as error:
        raise ConfigError(f"--megatron: {error}") from None
    found: list[DataArgs] = []

    @click.command(add_help_option=False)
    @_data_options
    def collect(data: DataArgs) -> None:
        found.append(data)

    try:
        collect.main(words, prog_name="--megatron", standalone_mode=False)
    except click.ClickException as error:
        raise ConfigError(f"--megatron: {error.format_message()}") from None
    return found[0]


def data_locator(data: DataArgs, decode: Any = None, with_text: bool = True) -> Locator:
    """The locator of the cache these options name (its description checked against them)."""
    prefixes, weights = parse_data_path([word for value in data.data_path for word in value.split()])
    settings = Settings(
        prefixes, weights, data.seq_length, "train", data.seed, data.split_string, data.train_samples
    )
    batching = Batching(data.global_batch_size, data.micro_batch_size, data.dp_size)
    return Locator(load_cache(data.cache_dir, settings), batching, decode=decode, with_text=with_text)


@megatron.command("locate")
@_data_options
@click.option("--iteration", type=int, default=None, help="As Megatron's log numbers it (from 1).")
@click.option("--iterations", "iteration_span", default=None, metavar="A-B", help="Several iterations.")
@click.option(
    "--consumed-samples",
    type=int,
    default=None,
    help="The consumed samples Megatron logged at --iteration (a resumed run, or batch-size ramp-up).",
)
@click.option(
    "--tokenizer",
    "tokenizer_spec",
    default=None,
    help="Decode spans with this tokenizer (default: the export's).",
)
@click.option("--no-text", is_flag=True, help="Leave the spans' text out.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of samples, for machines.")
def locate(
    data: DataArgs,
    iteration: int | None,
    iteration_span: str | None,
    consumed_samples: int | None,
    tokenizer_spec: str | None,
    no_text: bool,
    as_json: bool,
) -> None:
    """List, per global sample of an iteration, its rank, micro-batch and the document spans in it."""
    iterations = _iterations(iteration, iteration_span)
    if consumed_samples is not None and len(iterations) > 1:
        raise ConfigError("--consumed-samples goes with one --iteration")
    decode = None
    if tokenizer_spec is not None:
        decode = decode_bytes if tokenizer_spec == BYTES else TokenizerDecoder(PackTokenizer(tokenizer_spec))
    locator = data_locator(data, decode, not no_text)
    located = [s for i in iterations for s in locator.iteration(i, consumed_samples)]
    if as_json:
        click.echo(json.dumps([s.to_json() for s in located], ensure_ascii=False, indent=1))
        return
    for sample in located:
        _print(sample)


@megatron.command("filter")
@click.argument("prefix")
@click.option("--quarantine", "quarantine_list", required=True, metavar="LIST", help="The quarantine list.")
@click.option("-o", "--output", "new_prefix", required=True, metavar="NEWPREFIX")
@click.option("--ids", "ids_file", default=None, help="The ids file (default: PREFIX.ids.parquet).")
@click.option("--overwrite", is_flag=True)
def filter_command(
    prefix: str, quarantine_list: str, new_prefix: str, ids_file: str | None, overwrite: bool
) -> None:
    """Copy PREFIX without the documents the list drops (by id or text_hash), no retokenizing."""
    summary = filter_prefix(prefix, quarantine_list, new_prefix, ids_file, overwrite)
    click.echo(
        f"wrote {new_prefix}.bin/.idx: {summary['documents']:,} of {summary['documents_read']:,} documents, "
        f"{summary['left_out']:,} left out ({summary['tokens_left_out']:,} tokens), "
        f"{summary['downweighted']:,} down-weighted"
    )


@megatron.command("losses")
@click.argument("folder")
@_data_options
@click.option("-o", "--output", required=True, help="The per-sample loss log to write (Parquet).")
def losses_command(
    folder: str,
    data: DataArgs,
    output: str,
) -> None:
    """Per-document losses from FOLDER (the loss_func hook's files) for `dataclean feedback --losses`."""
    from dataclean.feedback.megatron import document_losses

    locator = data_locator(data, with_text=False)
    table = document_losses(folder, locator)
    write_parquet(output, table)
    click.echo(f"wrote {output}: {table.num_rows:,} (document, iteration) losses")


@megatron.command("suspects")
@click.argument("train_log")
@_data_options
@click.option(
    "--losses", "losses_path", default=None, help="Per-document losses (`dataclean megatron losses`)."
)
@click.option(
    "--corpus",
    default=None,
    help="The dataclean output exported (its ppl and quality rank suspects without losses).",
)
@click.option("-o", "--output", required=True, help="The quarantine list to write (entries for review).")
def suspects_command(
    train_log: str,
    data: DataArgs,
    losses_path: str | None,
    corpus: str | None,
    output: str,
) -> None:
    """The documents of every data spike in TRAIN_LOG (Megatron's log) as quarantine entries for review."""
    from dataclean.feedback.logs import read_step_log
    from dataclean.feedback.megatron import step_spikes, suspects
    from dataclean.feedback.megatron_log import is_megatron_log, logged_batches

    locator = data_locator(data, with_text=False)
    spikes = step_spikes(read_step_log(train_log).table)
    losses = read_parquet(losses_path) if losses_path else None
    logged = logged_batches(train_log) if is_megatron_log(train_log) else None
    listed = suspects(spikes, locator, losses=losses, corpus=corpus, logged=logged)
    write_list(listed, output)
    for spike in spikes:
        click.echo(
            f"iteration {spike.step}: loss {spike.loss:.4g} against {spike.level:.4g}: {spike.diagnosis}"
        )
    click.echo(f"wrote {output}: {listed.num_rows:,} documents of data spikes, for review")
