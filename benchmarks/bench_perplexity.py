"""Perplexity scoring speed per core, English and Chinese, against KenLM alone.

    python benchmarks/bench_perplexity.py [--data ../shared/data] [--repeat 3]

Corpora: WikiText-2 test paragraphs, detokenized (English) and the CMRC2018 paragraphs (Chinese),
from ../shared/data (or $DATACLEAN_SHARED_DATA). For each language it times, in one process:
- the stage: `ScorePerplexity` on an Arrow table (lang column given, as the clean stage adds it);
- its parts: CCNet normalization alone, normalization + tokenization (one compiled pass, so
  tokenization = the difference), the KenLM query on the tokenized lines, and the rest (Arrow,
  sums per text);
- for comparison, SentencePiece's own encode of the normalized lines (what tokenization cost
  before the compiled tokenizer);
- the reference: `kenlm.Model.score` on the same pre-tokenized lines (str) in a plain loop,
and prints samples/s, MB/s and reference / stage time (the issue's target: at least 0.5). Best of
`--repeat` interleaved runs, since the machine is shared; the word cache is warm after the first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from train_bundled_lm import wikitext_paragraphs  # noqa: E402

from dataclean import columns as C  # noqa: E402
from dataclean.lm.compiled import count_words  # noqa: E402
from dataclean.lm.model import LanguageModel  # noqa: E402
from dataclean.stages.perplexity import ScorePerplexity  # noqa: E402


def best(repeat: int, fns: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Fastest of `repeat` runs of each function, interleaved so all see the same machine load."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in times.items()}


def corpora(data: Path) -> dict[str, list[str]]:
    en = wikitext_paragraphs(data / "en" / "wikitext2" / "test.txt")
    zh_file = data / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt"
    zh = [line for line in zh_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"en": en, "zh": zh}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("DATACLEAN_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--data", type=Path, default=Path(default))
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    stage = ScorePerplexity()
    stage.setup()
    assert stage._loaded is not None
    header = f"{'lang':4} {'docs':>6} {'MB':>5} | {'stage MB/s':>10} {'docs/s':>8} | "
    header += f"{'normalize':>9} {'tokenize':>8} {'query':>6} {'rest':>5} (ms) | "
    header += f"{'spm encode':>10} (ms) | {'kenlm MB/s':>10} | ratio"
    print(header)
    for lang, texts in corpora(args.data).items():
        print(measure(stage, stage._loaded[lang], lang, texts, args.repeat))


def measure(stage: ScorePerplexity, model: LanguageModel, lang: str, texts: list[str], repeat: int) -> str:
    """One result line: the stage, its parts and the KenLM-only reference on `texts`."""
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

    t = best(
        repeat,
        {
            "stage": lambda: stage(table),
            "normalize": lambda: count_words(column),
            "normalize+tokenize": lambda: model.tokenize_array(column),
            "query": lambda: model.query(tokenized.lines),
            "spm": lambda: model.tokenizer.tokenize_lines(normalized),
            "kenlm": reference,
        },
    )
    tokenize = t["normalize+tokenize"] - t["normalize"]
    rest = t["stage"] - t["normalize+tokenize"] - t["query"]
    return (
        f"{lang:4} {len(texts):>6} {megabytes:>5.2f} | {megabytes / t['stage']:>10.2f} "
        f"{len(texts) / t['stage']:>8.0f} | {1e3 * t['normalize']:>9.1f} {1e3 * tokenize:>8.1f} "
        f"{1e3 * t['query']:>6.1f} {1e3 * rest:>5.1f}      | {1e3 * t['spm']:>10.1f}      | "
        f"{megabytes / t['kenlm']:>10.2f} | {t['kenlm'] / t['stage']:.2f}"
    )


if __name__ == "__main__":
    main()
