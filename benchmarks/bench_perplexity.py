"""Perplexity scoring speed per core, English and Chinese, against KenLM alone.

    python benchmarks/bench_perplexity.py [--data DIR] [--repeat 3]

Corpora: WikiText-2 test paragraphs, detokenized (English) and the CMRC2018 paragraphs (Chinese),
from the reference corpora folder (`--data`, default `$DATACLEAN_SHARED_DATA`: see
benchmarks/corpus.py). For each language it times, in one process:
- the stage: `ScorePerplexity` on an Arrow table (lang column given, as the clean stage adds it);
- its parts: CCNet normalization alone, normalization + tokenization (one compiled pass, so
  tokenization = the difference), the KenLM query on the tokenized lines, and the rest (Arrow,
  sums per text);
- for comparison, SentencePiece's own encode of the normalized lines (what tokenization cost
  before the compiled tokenizer);
- the reference: `kenlm.Model.score` on the same pre-tokenized lines (str) in a plain loop,
- datatrove's CCNet perplexity stats step (`CCNetPerplexityStats`, its own normalization and
  per-document scoring) on dataclean's bundled models, if datatrove is installed (see
  benchmarks/datatrove_equivalent.py: its hub download is replaced by the bundled files),
and prints samples/s, MB/s and stage / reference (the issue's target: at least 0.5). Best of
`--repeat` interleaved runs, since the machine is shared. Without the reference data, generated
text stands in. `--json PATH` also writes the comparisons (with peak memory above the input) for
benchmarks/run_all.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from train_bundled_lm import wikitext_paragraphs  # noqa: E402

from benchmarks.corpus import SHARED, generated_docs  # noqa: E402
from benchmarks.datatrove_equivalent import CCNetPerplexityByLanguage  # noqa: E402
from benchmarks.measure import Measurement, PeakMemory, comparison, write_json  # noqa: E402
from dataclean import columns as C  # noqa: E402
from dataclean.lm.compiled import count_words  # noqa: E402
from dataclean.stages.perplexity import ScorePerplexity  # noqa: E402


def best(
    repeat: int, fns: dict[str, Callable[[], Any]], memory: dict[str, float] | None = None
) -> dict[str, float]:
    """Fastest of `repeat` runs of each function, interleaved so all see the same machine load.
    `memory`, if given, receives each function's peak memory above its start (MiB, max of runs)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            with PeakMemory() as peak:
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
            if memory is not None and peak.megabytes is not None:
                memory[name] = max(memory.get(name, 0.0), peak.megabytes)
    return {name: min(values) for name, values in times.items()}


def corpora(data: Path) -> dict[str, list[str]]:
    if not (data / "en" / "wikitext2").is_dir():  # no reference data: generated text stands in
        docs = generated_docs(2000)
        return {"en": [d for d in docs if d.isascii()], "zh": [d for d in docs if not d.isascii()]}
    en = wikitext_paragraphs(data / "en" / "wikitext2" / "test.txt")
    zh_file = data / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt"
    zh = [line for line in zh_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"en": en, "zh": zh}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", help="also write the comparisons here (for run_all.py)")
    args = parser.parse_args()

    stage = ScorePerplexity()
    stage.setup()
    assert stage._loaded is not None
    header = f"{'lang':4} {'docs':>6} {'MB':>5} | {'stage MB/s':>10} {'docs/s':>8} | "
    header += f"{'normalize':>9} {'tokenize':>8} {'query':>6} {'rest':>5} (ms) | "
    header += f"{'spm encode':>10} (ms) | {'kenlm MB/s':>10} | ratio | {'datatrove MB/s':>14}"
    print(header)
    rows = []
    source = "reference data" if (args.data / "en" / "wikitext2").is_dir() else "generated text"
    for lang, texts in corpora(args.data).items():
        line, measured = measure(stage, stage._loaded[lang], lang, texts, args.repeat)
        print(line)
        name = {"en": "WikiText-2 test paragraphs", "zh": "CMRC2018 paragraphs"}[lang]
        name = name if source == "reference data" else source
        corpus = f"{lang}: {len(texts):,} docs, {measured['stage'].megabytes:.1f} MB ({name})"
        for reference in ("kenlm", "datatrove"):
            if reference in measured:
                rows.append(comparison(f"perplexity {lang}", corpus, measured["stage"], measured[reference]))
    if args.json:
        write_json(args.json, rows)


def measure(
    stage: ScorePerplexity, model: Any, lang: str, texts: list[str], repeat: int
) -> tuple[str, dict[str, Measurement]]:
    """One result line: the stage, its parts and the references on `texts`; and the measurements."""
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    ids = [str(i) for i in range(len(texts))]
    table = pa.table({C.ID: ids, C.TEXT: texts, C.LANG: [lang] * len(texts)})
    column = table.column(C.TEXT)
    tokenized = model.tokenize_array(column)
    as_str = [line.decode("utf-8") for line in tokenized.lines]
    normalized, _ = model.normalize(texts)
    score = model.kenlm.score

    def reference() -> None:
        for line in as_str:
            score(line)

    functions: dict[str, Callable[[], Any]] = {
        "stage": lambda: stage(table),
        "normalize": lambda: count_words(column),
        "normalize+tokenize": lambda: model.tokenize_array(column),
        "query": lambda: model.query(tokenized.lines),
        "spm": lambda: model.tokenizer.tokenize_lines(normalized),
        "kenlm": reference,
    }
    with tempfile.TemporaryDirectory() as scratch:
        datatrove = datatrove_step(lang, texts, scratch)
        if datatrove is not None:
            functions["datatrove"] = datatrove
        memory: dict[str, float] = {}
        t = best(repeat, functions, memory)
    tokenize = t["normalize+tokenize"] - t["normalize"]
    rest = t["stage"] - t["normalize+tokenize"] - t["query"]
    line = (
        f"{lang:4} {len(texts):>6} {megabytes:>5.2f} | {megabytes / t['stage']:>10.2f} "
        f"{len(texts) / t['stage']:>8.0f} | {1e3 * t['normalize']:>9.1f} {1e3 * tokenize:>8.1f} "
        f"{1e3 * t['query']:>6.1f} {1e3 * rest:>5.1f}      | {1e3 * t['spm']:>10.1f}      | "
        f"{megabytes / t['kenlm']:>10.2f} | {t['kenlm'] / t['stage']:.2f}"
    )
    if "datatrove" in t:
        line += f"  | {megabytes / t['datatrove']:>14.2f}"
    names = {
        "stage": "ScorePerplexity stage",
        "kenlm": "KenLM alone (pre-tokenized lines)",
        "datatrove": "datatrove CCNetPerplexityStats",
    }
    measured = {
        key: Measurement(names[key], len(texts), megabytes, t[key], peak_mb=memory.get(key))
        for key in names
        if key in t
    }
    return line, measured


def datatrove_step(lang: str, texts: list[str], scratch: str) -> Callable[[], Any] | None:
    """datatrove's CCNet perplexity stats step over `texts` as Documents; None without datatrove."""
    try:
        from datatrove.data import Document
    except ImportError:
        return None
    documents = [Document(text=text, id=str(i), metadata={C.LANG: lang}) for i, text in enumerate(texts)]
    step = CCNetPerplexityByLanguage(scratch, languages=(lang,))
    step.models[lang].get_perplexity("load the model outside the timing")

    def run() -> None:
        for _ in step.run(iter(documents)):
            pass

    return run


if __name__ == "__main__":
    main()
