"""`dataclean export megatron` against Megatron-LM's `tools/preprocess_data.py`, same corpus,
tokenizer and run.

    python benchmarks/bench_megatron.py [--data PATH] [--rounds 3] [--repeat 1]

`preprocess_data.py` is a script of the Megatron-LM repository, not of the megatron-core wheel,
and it needs Megatron-LM's training package for its arguments and tokenizer; so its documented
behaviour is reproduced here with megatron-core's own writer: JSON lines read from one file
(`--partitions 1`), a `multiprocessing.Pool(workers)` whose workers `json.loads` each line and
tokenize its text (`imap`, chunks of 32), the end-of-document id appended (`--append-eod`), and
the driver adding each document to megatron-core's `IndexedDatasetBuilder` with
`DType.optimal_dtype(vocab_size)`, then `finalize`. The tokenizer is the same tokenizer.json for
both, called per document as Megatron's Hugging Face wrapper does (`tokenizers` directly, no
special tokens), a byte-level BPE of 8,192 tokens trained here on the corpus.

dataclean: `export_megatron` from the run's Parquet files, on the local executor (one worker) and
a warm 2-worker Ray, writing the ids file besides the `.bin/.idx`, with a tokenizer loaded afresh
for every call as a command does (the reference's pool workers load theirs per call too; a
tokenizer kept across rounds would keep its word cache warm). Agreement: the reproduction is
fed the documents in dataclean's export order, so both `.bin` and `.idx` must be byte-identical.

How each side calls the tokenizer, both as documented: the reference per document
(`Tokenizer.encode`, as Megatron's tokenizer wrapper is called by `preprocess_data.py`), in its
pool worker; dataclean once per batch (`encode_batch_fast`, which the `tokenizers` library runs
on its own thread pool, all cores by default). So `dataclean_local` is one worker process whose
tokenizer may use every core, as `dataclean export megatron --executor local` runs;
`dataclean_local_1_thread` is the same call with `TOKENIZERS_PARALLELISM=false`, one core: the
strict per-core comparison with the reference's one worker (which also has the driver process
reading JSON and writing). CPU seconds are given for the three.
Benchmarks only: tests never import this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import corpus  # noqa: E402
from benchmarks.bench_pack import EOS, samples, train_tokenizer, write_run  # noqa: E402
from benchmarks.rounds import describe, round_ratios, timed_rounds  # noqa: E402
from dataclean.executors.local import LocalExecutor  # noqa: E402
from dataclean.export.megatron.run import export_megatron  # noqa: E402
from dataclean.export.tokenizer import PackTokenizer  # noqa: E402

FILES = 8


class Encoder:
    """preprocess_data.py's Encoder: the tokenizer built once per pool worker (`initializer`)."""

    tokenizer: Any = None
    eod = 0

    def __init__(self, tokenizer_path: str) -> None:
        self.tokenizer_path = tokenizer_path

    def initializer(self) -> None:
        from tokenizers import Tokenizer

        Encoder.tokenizer = Tokenizer.from_file(self.tokenizer_path)
        Encoder.eod = Encoder.tokenizer.token_to_id(EOS)

    def encode(self, json_line: str) -> tuple[list[int], list[int], int]:
        text = json.loads(json_line)["text"]
        ids = Encoder.tokenizer.encode(text, add_special_tokens=False).ids
        if ids:
            ids.append(Encoder.eod)
        return ids, [len(ids)] if ids else [], len(json_line)


def preprocess_data(jsonl: Path, tokenizer_path: Path, prefix: Path, workers: int, vocab_size: int) -> None:
    """tools/preprocess_data.py --input JSONL --json-keys text --append-eod --workers N, reproduced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset

    encoder = Encoder(str(tokenizer_path))
    builder = indexed_dataset.IndexedDatasetBuilder(
        str(prefix) + ".bin", dtype=indexed_dataset.DType.optimal_dtype(vocab_size)
    )
    with (
        open(jsonl, encoding="utf-8") as lines,
        multiprocessing.Pool(workers, initializer=encoder.initializer) as pool,
    ):
        for ids, lengths, _ in pool.imap(encoder.encode, lines, 32):
            builder.add_document(ids, lengths)
    builder.finalize(str(prefix) + ".idx")


def cpu_seconds(call: Any) -> float:
    """User + system CPU seconds of one call, in this process and the children it reaped (a pool's
    workers): a figure a loaded machine changes less than the wall time."""
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    call()
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before, strict=True))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """`tokenizers` on one thread: it reads TOKENIZERS_PARALLELISM at every batch call."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def dataclean_export(
    run: Path, prefix: Path, tokenizer_path: Path, executor: Any, threads: bool = True
) -> None:
    """`dataclean export megatron` as a command runs it: the tokenizer loaded, then the export."""
    with contextlib.nullcontext() if threads else one_thread():
        tokenizer = PackTokenizer(str(tokenizer_path))
        export_megatron(str(run), str(prefix), tokenizer, executor, overwrite=True)


def export_order(texts: list[str]) -> list[str]:
    """The documents in dataclean's export order (files by name; write_run deals rows round robin)."""
    return [texts[r] for k in range(FILES) for r in range(k, len(texts), FILES)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus.add_data_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="copies of the corpus")
    parser.add_argument("--documents", type=int, default=None, help="only the first N documents")
    args = parser.parse_args()
    corpus.use_data(args.data, args.generated)
    from dataclean.executors.ray import RayExecutor

    texts = samples(args.repeat)[: args.documents]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        run = write_run(work / "run", texts)
        jsonl = work / "corpus.jsonl"
        jsonl.write_text(
            "".join(json.dumps({"text": t}) + "\n" for t in export_order(texts)), encoding="utf-8"
        )
        tokenizer_path = train_tokenizer(texts[: len(texts) // args.repeat], work / "tokenizer.json")
        tokenizer = PackTokenizer(str(tokenizer_path))
        megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        ray = RayExecutor(workers=2)
        try:
            candidates = {
                "preprocess_data_1": lambda: preprocess_data(
                    jsonl, tokenizer_path, work / "m1", 1, tokenizer.vocab_size
                ),
                "dataclean_local": lambda: dataclean_export(
                    run, work / "d1" / "corpus", tokenizer_path, LocalExecutor()
                ),
                "dataclean_local_1_thread": lambda: dataclean_export(
                    run, work / "d0" / "corpus", tokenizer_path, LocalExecutor(), threads=False
                ),
                "preprocess_data_2": lambda: preprocess_data(
                    jsonl, tokenizer_path, work / "m2", 2, tokenizer.vocab_size
                ),
                "dataclean_ray_2": lambda: dataclean_export(run, work / "d2" / "corpus", tokenizer_path, ray),
            }
            seconds = timed_rounds(candidates, args.rounds)
            cpu = {name: cpu_seconds(candidates[name]) for name in list(candidates)[:3]}
        finally:
            ray.close()
        same = {
            suffix: (work / f"m1{suffix}").read_bytes() == (work / "d1" / f"corpus{suffix}").read_bytes()
            for suffix in (".bin", ".idx")
        }
        same_ray = all(
            (work / "d1" / "corpus.bin").read_bytes() == (work / other / "corpus.bin").read_bytes()
            for other in ("d0", "d2")
        )
        summary = json.loads((work / "d1" / "corpus.json").read_text())

    print(
        f"corpus: {len(texts):,} documents, {megabytes:.1f} MB, {summary['tokens']:,} tokens "
        f"({summary['dtype']})"
    )
    for name, values in seconds.items():
        print(f"  {name:18} {describe([megabytes / s for s in values], 2, ' MB/s')}")
    local = round_ratios(seconds["preprocess_data_1"], seconds["dataclean_local"])
    one_core = round_ratios(seconds["preprocess_data_1"], seconds["dataclean_local_1_thread"])
    on_ray = round_ratios(seconds["preprocess_data_2"], seconds["dataclean_ray_2"])
    print(f"dataclean local (1 worker, with ids) / preprocess_data 1 worker: {describe(local, 2, 'x')}")
    print(f"dataclean local, tokenizer on 1 thread / preprocess_data 1 worker: {describe(one_core, 2, 'x')}")
    print(f"dataclean Ray 2 (with ids) / preprocess_data 2 workers: {describe(on_ray, 2, 'x')}")
    reference = cpu["preprocess_data_1"]
    shown = ", ".join(
        f"{name} {value:.2f} ({reference / value:.2f}x)" for name, value in list(cpu.items())[1:]
    )
    print(
        f"CPU seconds (this process with its threads and its reaped children, one more call each): "
        f"preprocess_data 1 worker {reference:.2f}, {shown}"
    )
    print(
        f"agreement: .bin identical {same['.bin']}, .idx identical {same['.idx']}; "
        f"1 thread and Ray 2 = local: {same_ray}"
    )


if __name__ == "__main__":
    main()
