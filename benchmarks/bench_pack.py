"""`dataclean pack` against datatrove's tokenizer step, on the same corpus and tokenizer, same run.

    python benchmarks/bench_pack.py [--data PATH] [--rounds 3] [--seq-len 2048] [--repeat 2]

The corpus: real English and Chinese text (WikiText-2 paragraphs, CMRC 2018 Wikipedia paragraphs,
Common Crawl pages; split at 2,000 characters as `dataclean run`'s split stage does by default),
written as a run's `data/` in 8 Parquet files. The tokenizer: a byte-level BPE of 8,192 tokens
trained here with the `tokenizers` library on that text (nothing is downloaded).

- datatrove: `ParquetReader -> DocumentTokenizer` (its tokenize-and-write step, `eos_token`
  appended by its post-processor, documents shuffled, its defaults otherwise) on a
  `LocalPipelineExecutor`, one task per file, 1 and 2 workers.
- dataclean: `pack_corpus` (tokenize, best-fit-decreasing packing across the corpus, shuffled
  sequences written with ids and spans) on the local executor and on a warm 2-worker Ray.

Agreement: datatrove's token stream, cut at its document index, must hold exactly the documents
dataclean packed (each sample's tokens + end-of-sample, as a multiset). Also reported: the
padding of best-fit packing against the samples that concatenate-and-chunk (what a datatrove
`DatatroveFolderDataset` reads) would cut at sequence boundaries.
Benchmarks only: tests never import this module.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import corpus  # noqa: E402
from benchmarks.rounds import describe, round_ratios, timed_rounds  # noqa: E402
from dataclean.executors.local import LocalExecutor  # noqa: E402
from dataclean.pack.packer import naive_truncations  # noqa: E402
from dataclean.pack.run import pack_corpus  # noqa: E402
from dataclean.pack.tokenizer import PackTokenizer  # noqa: E402
from dataclean.pack.write import read_packed  # noqa: E402
from dataclean.text.chunking import chunk_text  # noqa: E402

FILES = 8
EOS = "<|endoftext|>"


def samples(repeat: int) -> list[str]:
    """Real documents cut into samples of at most 2,000 characters, as the split stage does."""
    wikitext = (corpus.SHARED / "en" / "wikitext2" / "valid.txt").read_text(encoding="utf-8")
    english = [
        p.strip() for p in wikitext.split("\n") if len(p.strip()) > 40 and not p.strip().startswith("=")
    ]
    documents = english + corpus.zh_docs()[:3000] + corpus.web_docs()
    cut = [chunk for text in documents for chunk in chunk_text(text, 2000) if chunk.strip()]
    return cut * repeat  # no empty samples: datatrove's reader skips them, a run drops them


def write_run(folder: Path, texts: list[str]) -> Path:
    data = folder / "data"
    data.mkdir(parents=True)
    for k in range(FILES):
        rows = list(range(k, len(texts), FILES))
        pq.write_table(
            pa.table({"id": [f"s{r}" for r in rows], "text": [texts[r] for r in rows]}),
            data / f"part-{k:05d}.parquet",
        )
    return folder


def train_tokenizer(texts: list[str], path: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8192,
        special_tokens=[EOS, "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))
    return path


def datatrove_tokenize(run: Path, tokenizer: Path, output: Path, workers: int, shuffle: bool = True) -> None:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    LocalPipelineExecutor(
        pipeline=[
            ParquetReader(str(run / "data"), glob_pattern="*.parquet", text_key="text", id_key="id"),
            DocumentTokenizer(
                str(output),
                tokenizer_name_or_path=str(tokenizer),
                eos_token=EOS,
                shuffle_documents=shuffle,
            ),
        ],
        tasks=FILES,
        workers=workers,
        logging_dir=str(output / "logs"),
        skip_completed=False,
    ).run()


def datatrove_documents(output: Path) -> Counter[tuple[int, ...]]:
    """Every document of datatrove's .ds files, cut at the ends in its .ds.index files."""
    documents: Counter[tuple[int, ...]] = Counter()
    for path in sorted(glob.glob(str(output / "*.ds"))):
        tokens = np.fromfile(path, dtype=np.uint16)
        ends = np.fromfile(path + ".index", dtype=np.uint64).astype(np.int64)
        for start, end in zip(np.r_[0, ends[:-1]], ends, strict=True):
            documents[tuple(tokens[start:end].tolist())] += 1
    return documents


def packed_documents(output: Path) -> tuple[Counter[tuple[int, ...]], int]:
    """The tokens of every sample packed whole (one span), and the count of samples in pieces."""
    spans: dict[str, list[tuple[int, ...]]] = {}
    for row in read_packed(str(output)).to_pylist():
        for sample_id, start, length in zip(
            row["sample_ids"], row["sample_starts"], row["sample_lengths"], strict=True
        ):
            spans.setdefault(sample_id, []).append(tuple(row["input_ids"][start : start + length]))
    whole = Counter(pieces[0] for pieces in spans.values() if len(pieces) == 1)
    return whole, sum(1 for pieces in spans.values() if len(pieces) > 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus.add_data_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=2, help="copies of the corpus")
    args = parser.parse_args()
    corpus.use_data(args.data, args.generated)
    from dataclean.executors.ray import RayExecutor

    texts = samples(args.repeat)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        run = write_run(work / "run", texts)
        tokenizer_path = train_tokenizer(texts[: len(texts) // args.repeat], work / "tokenizer.json")
        tokenizer = PackTokenizer(str(tokenizer_path))
        megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        ray = RayExecutor(workers=2)
        try:
            candidates = {
                "datatrove_1": lambda: datatrove_tokenize(run, tokenizer_path, work / "dt1", 1),
                "dataclean_local": lambda: pack_corpus(
                    str(run), str(work / "p1"), tokenizer, args.seq_len, LocalExecutor(), overwrite=True
                ),
                "datatrove_2": lambda: datatrove_tokenize(run, tokenizer_path, work / "dt2", 2),
                "dataclean_ray_2": lambda: pack_corpus(
                    str(run), str(work / "p2"), tokenizer, args.seq_len, ray, overwrite=True
                ),
            }
            seconds = timed_rounds(candidates, args.rounds)
        finally:
            ray.close()
        summary = json.loads((work / "p1" / "pack.json").read_text())
        datatrove_tokenize(run, tokenizer_path, work / "dt_plain", 2, shuffle=False)
        theirs, (ours, in_pieces) = datatrove_documents(work / "dt_plain"), packed_documents(work / "p1")
        fitting = Counter({doc: n for doc, n in theirs.items() if len(doc) <= args.seq_len})
        lengths = np.array([len(doc) for doc, n in theirs.items() for _ in range(n)])
        rng = np.random.default_rng(0)
        shuffled = rng.permutation(lengths)

    print(
        f"corpus: {len(texts):,} samples, {megabytes:.1f} MB, {summary['tokens']:,} tokens; "
        f"seq_len {args.seq_len}"
    )
    for name, values in seconds.items():
        print(f"  {name:16} {describe([megabytes / s for s in values], 2, ' MB/s')}")
    local = round_ratios(seconds["datatrove_1"], seconds["dataclean_local"])
    on_ray = round_ratios(seconds["datatrove_2"], seconds["dataclean_ray_2"])
    print(f"dataclean local / datatrove 1 worker: {describe(local, 2, 'x')}")
    print(f"dataclean Ray 2 / datatrove 2 workers: {describe(on_ray, 2, 'x')}")
    print(
        f"agreement: datatrove tokenized {sum(theirs.values()):,} documents, {sum(fitting.values()):,} of "
        f"them within {args.seq_len} tokens; dataclean packed {sum(ours.values()):,} samples whole, "
        f"{sum((fitting & ours).values()):,} with exactly datatrove's tokens (identical multisets: "
        f"{fitting == ours}), and {in_pieces} longer ones in pieces"
    )
    naive = naive_truncations(shuffled, args.seq_len)
    print(
        f"best-fit packing: {summary['sequences']:,} sequences, padding {summary['padding_fraction']:.3%}, "
        f"{summary['split_samples']:,} samples longer than {args.seq_len} split; concatenate-and-chunk: "
        f"{-(-int(lengths.sum()) // args.seq_len):,} sequences, {naive:,} of {len(lengths):,} samples "
        "cut at a sequence boundary"
    )


if __name__ == "__main__":
    main()
