"""Benchmark the clean stage against ftfy.fix_text on every document, and its mojibake repair.

    python benchmarks/bench_clean.py [--repeat 4] [--rounds 3] [--json PATH]

Speed, MB/s per core (one process), every implementation on the same documents, with the same
warm-up (one untimed pass over the first 200 documents) and the same number of timed rounds, run
round-robin so that all see the same load on a shared machine (each round starting one case
later, so that no case always runs first); each figure is the median over the rounds with the
min-max beside it:
- dataclean's CleanText stage on Arrow batches (the whole stage: cleaning, garbage),
  its `clean_text` function alone, and CleanText followed by the `language` stage that comes
  after it in the default recipe (lid.176 on the first 2,000 characters; its model read once,
  outside the timing, as once per worker);
- ftfy.fix_text on every document with the fixers dataclean also applies (HTML entities, encoding
  with its C1, byte-A0 and lossy-sequence fixes, line breaks, control characters) and the others
  (quotes, widths, ligatures, surrogates, terminal escapes, NFC) off: the reference for the >= 8x
  target;
- datatrove's FTFYFormatter step over datatrove Documents (ftfy.fix_text as datatrove configures
  it), if datatrove is installed;
- one regex pass stripping control characters (a floor: the least any cleaner must do).
The corpus is web + Chinese documents (`--repeat` copies), 3% of them with their first 200
characters turned into mojibake through one of five code pages in turn (UTF-8 read as
Windows-1252, MacRoman, Windows-1251, Windows-1250, cp437).

Repair quality, two measures (ftfy is the reference; neither side's other fixers count, since
both outputs go through dataclean's removal steps before comparing):
- on the corpus: of the documents ftfy (same fixers) changes, how many dataclean changes the same;
- the issue's measure: real multilingual web lines (with non-ASCII letters) turned into mojibake
  through each of the five code pages: the share that `clean_text` and `ftfy.fix_text` give back
  exactly, and how often the two agree.

`--json PATH` also writes the comparisons (each implementation's peak memory above the input, see
benchmarks/measure.py) and the quality figures for benchmarks/run_all.py.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ftfy
import ftfy.bad_codecs  # registers the sloppy-windows-* codecs
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import SHARED, generated_docs, have_shared, web_docs, zh_docs
from benchmarks.measure import Measurement, PeakMemory, comparison, write_json
from dataclean import columns as C
from dataclean.stages.clean import CleanText, clean_text
from dataclean.stages.language import IdentifyLanguage

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# UTF-8 read as: Windows-1252, MacRoman, Windows-1251, Windows-1250, cp437 (undefined bytes of
# the Windows code pages read as Latin-1, as browsers and ftfy's sloppy codecs do).
CODE_PAGES = ("sloppy-windows-1252", "macroman", "sloppy-windows-1251", "sloppy-windows-1250", "cp437")
# ftfy with the fixers dataclean's clean stage also applies; the rest off.
SAME_FIXERS = ftfy.TextFixerConfig(
    remove_terminal_escapes=False,
    fix_latin_ligatures=False,
    fix_character_width=False,
    uncurl_quotes=False,
    fix_surrogates=False,
    normalization=None,
    explain=False,
)
WARM_UP_DOCS = 200


def mojibake(text: str, code_page: str) -> str:
    return text.encode("utf-8").decode(code_page)


def corpus(repeat: int, seed: int = 1) -> list[str]:
    """Web + Chinese documents, `repeat` times, 3% with mojibake through the five code pages."""
    base = web_docs() + zh_docs() if have_shared() else generated_docs()
    rng = random.Random(seed)
    docs, broken = [], 0
    for _ in range(repeat):
        for doc in base:
            if doc and rng.random() < 0.03:
                cut = min(len(doc), 200)
                doc = mojibake(doc[:cut], CODE_PAGES[broken % len(CODE_PAGES)]) + doc[cut:]
                broken += 1
            docs.append(doc)
    return docs


def timed_rounds(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds of each case in each round. Cases run round-robin so that all see the same load,
    and each round starts one case later, so that no case is always the first (or last) run."""
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_ in range(rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            started = time.perf_counter()
            cases[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds


def peak_memory(function: Callable[[], object]) -> float | None:
    """Peak memory of one more, untimed run (its sampling thread would slow the timed ones)."""
    with PeakMemory() as memory:
        function()
    return memory.megabytes


def multilingual_lines(limit: int = 3000, seed: int = 14) -> list[str]:
    """Lines of the web documents that hold non-ASCII letters (real multilingual text)."""
    if not have_shared():
        return []
    lines = {
        line.strip()
        for doc in web_docs()
        for line in doc.split("\n")
        if 10 <= len(line.strip()) <= 400 and any(ord(char) > 127 and char.isalpha() for char in line)
    }
    chosen = sorted(lines)
    random.Random(seed).shuffle(chosen)
    return chosen[:limit]


def removal_only(text: str) -> str:
    """dataclean's removal steps alone (no repair), applied to both sides before comparing."""
    return clean_text(text, fix_mojibake=False, unescape_html=False)


def code_page_repair(lines: list[str]) -> dict[str, dict[str, Any]]:
    """Per code page: lines turned into mojibake, and how many clean_text / ftfy give back."""
    results: dict[str, dict[str, Any]] = {}
    for code_page in CODE_PAGES:
        cases = ours = theirs = agree = 0
        for line in lines:
            broken = mojibake(line, code_page)
            if broken == line:
                continue
            expected = removal_only(line)
            ours_text = clean_text(broken)
            ftfy_text = removal_only(ftfy.fix_text(broken, SAME_FIXERS))
            cases += 1
            ours += ours_text == expected
            theirs += ftfy_text == expected
            agree += ours_text == ftfy_text
        results[code_page] = {"lines": cases, "clean_text": ours, "ftfy": theirs, "agree": agree}
    return results


def corpus_repair(docs: list[str]) -> dict[str, int]:
    """Of the documents ftfy (same fixers) changes, how many clean_text changes identically."""
    changed = same = 0
    for doc in docs:
        reference = removal_only(ftfy.fix_text(doc, SAME_FIXERS))
        if reference != removal_only(doc):
            changed += 1
            same += clean_text(doc) == reference
    return {"ftfy_changed": changed, "same": same}


def datatrove_case(docs: list[str]) -> Callable[[], object] | None:
    """datatrove's FTFYFormatter step over `docs` (Documents built outside the timing)."""
    try:
        from datatrove.data import Document
        from datatrove.pipeline.formatters import FTFYFormatter
    except ImportError:
        return None
    formatter = FTFYFormatter()

    def run() -> None:
        documents = [Document(text=doc, id=str(i)) for i, doc in enumerate(docs)]
        for _ in formatter.run(iter(documents)):
            pass

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4, help="copies of the base corpus")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per implementation")
    parser.add_argument("--batch-rows", type=int, default=2048)
    parser.add_argument("--json", help="also write the comparisons here (for run_all.py)")
    args = parser.parse_args()

    docs = corpus(args.repeat)
    megabytes = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    source = str(SHARED) if have_shared() else "generated text"
    print(f"corpus: {len(docs):,} documents, {megabytes:.1f} MB ({source}), 3% with mojibake")

    stage = CleanText()

    language = IdentifyLanguage()
    language.setup()

    def batches_of(texts: list[str]) -> list[pa.Table]:
        return [
            pa.table({C.ID: [str(i) for i in range(len(chunk))], C.TEXT: chunk})
            for chunk in (texts[i : i + args.batch_rows] for i in range(0, len(texts), args.batch_rows))
        ]

    def clean_then_language(batches: list[pa.Table]) -> None:
        for batch in batches:
            language(stage(batch).drop_columns([C.DROP_REASON]))

    def cases_for(texts: list[str]) -> dict[str, Callable[[], object]]:
        batches = batches_of(texts)
        found: dict[str, Callable[[], object]] = {
            "dataclean CleanText (whole stage)": lambda: [stage(batch) for batch in batches],
            "dataclean CleanText + IdentifyLanguage": lambda: clean_then_language(batches),
            "dataclean clean_text (function)": lambda: [clean_text(doc) for doc in texts],
            "ftfy.fix_text, same fixers": lambda: [ftfy.fix_text(doc, SAME_FIXERS) for doc in texts],
            "regex strip of control characters": lambda: [CONTROL.sub("", doc) for doc in texts],
        }
        datatrove = datatrove_case(texts)
        if datatrove is not None:
            found["datatrove FTFYFormatter step"] = datatrove
        return found

    for function in cases_for(docs[:WARM_UP_DOCS]).values():
        function()  # the same warm-up for all (compiles the kernels, fills caches)
    cases = cases_for(docs)
    seconds = timed_rounds(cases, args.rounds)
    memory = {name: peak_memory(function) for name, function in cases.items()}
    median = {name: statistics.median(values) for name, values in seconds.items()}
    reference = megabytes / median["ftfy.fix_text, same fixers"]
    print(f"median of {args.rounds} rounds, same input, same warm-up; one core")
    print(f"{'implementation':38} {'MB/s/core':>10} {'(min-max)':>14} {'x ftfy same fixers':>19}")
    for name, values in seconds.items():
        rate = megabytes / median[name]
        spread = f"({megabytes / max(values):.1f}-{megabytes / min(values):.1f})"
        print(f"{name:38} {rate:10.1f} {spread:>14} {rate / reference:18.1f}x")

    on_corpus = corpus_repair(docs[: len(docs) // args.repeat])
    print(
        f"corpus: of {on_corpus['ftfy_changed']} documents ftfy (same fixers) changes, "
        f"clean_text changes {on_corpus['same']} identically"
    )
    lines = multilingual_lines()
    pages = code_page_repair(lines)
    if lines:
        print(f"{len(lines)} real multilingual web lines turned into mojibake through five code pages:")
        print(f"    {'code page':22}{'lines':>7}{'clean_text':>12}{'ftfy':>8}{'agree':>8}")
        totals = dict.fromkeys(("lines", "clean_text", "ftfy", "agree"), 0)
        for code_page, counts in pages.items():
            totals = {key: totals[key] + counts[key] for key in totals}
            share = {key: counts[key] / max(counts["lines"], 1) for key in counts}
            print(
                f"    {code_page:22}{counts['lines']:7}{share['clean_text']:12.3f}"
                f"{share['ftfy']:8.3f}{share['agree']:8.3f}"
            )
        n = max(totals["lines"], 1)
        print(
            f"    {'all':22}{totals['lines']:7}{totals['clean_text'] / n:12.3f}"
            f"{totals['ftfy'] / n:8.3f}{totals['agree'] / n:8.3f}"
        )

    if args.json:
        kind = "web + Chinese" if have_shared() else "generated text"
        note = f"{len(docs):,} docs, {megabytes:.1f} MB {kind}, 3% with mojibake (5 code pages)"

        def measured(name: str) -> Measurement:
            return Measurement(name, len(docs), megabytes, median[name], peak_mb=memory[name])

        ours = measured("dataclean CleanText (whole stage)")
        references = [name for name in cases if name.startswith(("ftfy", "datatrove"))]
        rows = [comparison("clean", note, ours, measured(name)) for name in references]
        rounds = {name: [megabytes / value for value in values] for name, values in seconds.items()}
        write_json(args.json, rows, quality={"corpus": on_corpus, "code_pages": pages}, rounds_mb_s=rounds)


if __name__ == "__main__":
    main()
