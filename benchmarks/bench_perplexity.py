"""Perplexity scoring speed per core, English and Chinese, against KenLM alone.

    python benchmarks/bench_perplexity.py [--data PATH] [--repeat 5] [--passes 10]

Corpora: WikiText-2 test paragraphs, detokenized (English) and the CMRC2018 paragraphs (Chinese),
from the reference data folder (`--data`). For each language it times, in one process:
- the stage: `ScorePerplexity` on an Arrow table (lang column given, as the clean stage adds it);
- its parts: CCNet normalization alone, normalization + tokenization (one compiled pass, so
  tokenization = the difference), the query on the tokenized lines (KenLM's scores, computed by
  the compiled scorer `dataclean.lm.ngram` from the model's own tables), and the rest (Arrow,
  sums per text);
- for comparison, SentencePiece's own encode of the normalized lines (what tokenization cost
  before the compiled tokenizer);
- the reference: `kenlm.Model.score` on the same pre-tokenized lines (str) in a plain loop,
- datatrove's CCNet perplexity stats step (`CCNetPerplexityStats`, its own normalization and
  per-document scoring) on dataclean's bundled models, if datatrove is installed (see
  benchmarks/datatrove_equivalent.py: its hub download is replaced by the bundled files),
and prints samples/s, MB/s and stage / reference (the target: at least 1.0). Every function is
called once untimed (warm-up; its peak memory above the input is measured then), then `--passes`
times in a row per round (one pass is tens of milliseconds) for `--repeat` rounds in a rotating
order (`benchmarks/rounds.py`): times are medians, and
the ratios in `--json` are medians of per-round ratios with their min-max. `--generated` uses
generated text. `--json PATH` also writes the comparisons for benchmarks/run_all.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from train_bundled_lm import wikitext_paragraphs  # noqa: E402

from benchmarks import corpus as data  # noqa: E402
from benchmarks.datatrove_equivalent import CCNetPerplexityByLanguage  # noqa: E402
from benchmarks.measure import Measurement, PeakMemory, comparison, write_json  # noqa: E402
from benchmarks.rounds import timed_rounds  # noqa: E402
from dataclean import columns as C  # noqa: E402
from dataclean.lm.compiled import count_words  # noqa: E402
from dataclean.stages.perplexity import ScorePerplexity  # noqa: E402


def timed(
    repeat: int, fns: dict[str, Callable[[], Any]], memory: dict[str, float], passes: int = 1
) -> dict[str, list[float]]:
    """Seconds of one call of each function per round (the mean of `passes` calls in a row, so a
    round is long enough for the clock and the scheduler: one pass over these corpora takes tens
    of milliseconds), after one untimed call of each (warm-up), during which `memory` receives
    its peak memory above its start (MiB)."""
    for name, fn in fns.items():
        with PeakMemory() as peak:
            fn()
        if peak.megabytes is not None:
            memory[name] = peak.megabytes

    def repeated(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(passes):
                fn()

        return run

    rounds = timed_rounds({name: repeated(fn) for name, fn in fns.items()}, repeat, warmup=0)
    return {name: [seconds / passes for seconds in values] for name, values in rounds.items()}


def corpora(folder: Path | None) -> dict[str, list[str]]:
    if folder is None:  # --generated
        docs = data.generated_docs(2000)
        return {"en": [d for d in docs if d.isascii()], "zh": [d for d in docs if not d.isascii()]}
    en = wikitext_paragraphs(folder / "en" / "wikitext2" / "test.txt")
    zh_file = folder / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt"
    zh = [line for line in zh_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"en": en, "zh": zh}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_data_argument(parser)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds")
    parser.add_argument("--json", help="also write the comparisons here (for run_all.py)")
    parser.add_argument("--passes", type=int, default=10, help="calls of each function per round")
    args = parser.parse_args()
    data.use_data(args.data, args.generated)

    stage = ScorePerplexity()
    stage.setup()
    assert stage._loaded is not None
    header = f"{'lang':4} {'docs':>6} {'MB':>5} | {'stage MB/s':>10} {'docs/s':>8} | "
    header += f"{'normalize':>9} {'tokenize':>8} {'query':>6} {'rest':>5} (ms) | "
    header += f"{'spm encode':>10} (ms) | {'kenlm MB/s':>10} | ratio | {'datatrove MB/s':>14}"
    print(header)
    rows = []
    source = "reference data" if data.have_shared() else "generated text"
    for lang, texts in corpora(data.SHARED if data.have_shared() else None).items():
        line, measured = measure(stage, stage._loaded[lang], lang, texts, args.repeat, args.passes)
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
    stage: ScorePerplexity, model: Any, lang: str, texts: list[str], repeat: int, passes: int = 1
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
    kenlm_scores = np.array([score(line) for line in as_str], np.float64)
    same = bool(np.array_equal(model.query_tokenized(tokenized), kenlm_scores))

    def reference() -> None:
        for line in as_str:
            score(line)

    functions: dict[str, Callable[[], Any]] = {
        "stage": lambda: stage(table),
        "normalize": lambda: count_words(column),
        "normalize+tokenize": lambda: model.tokenize_array(column),
        "query": lambda: model.query_tokenized(tokenized),
        "spm": lambda: model.tokenizer.tokenize_lines(normalized),
        "kenlm": reference,
    }
    with tempfile.TemporaryDirectory() as scratch:
        datatrove = datatrove_step(lang, texts, scratch)
        if datatrove is not None:
            functions["datatrove"] = datatrove
        memory: dict[str, float] = {}
        rounds = timed(repeat, functions, memory, passes)
    t = {name: statistics.median(values) for name, values in rounds.items()}
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
    line += f"  | same scores as KenLM: {'yes' if same else 'NO'}"
    names = {
        "stage": "ScorePerplexity stage",
        "kenlm": "KenLM alone (pre-tokenized lines)",
        "datatrove": "datatrove CCNetPerplexityStats",
    }
    measured = {
        key: Measurement(
            names[key], len(texts), megabytes, t[key], peak_mb=memory.get(key), rounds=rounds[key]
        )
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
