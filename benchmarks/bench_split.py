"""Speed (MB/s per core) and sentence agreement of the split stage, on English and Chinese.

Usage: python benchmarks/bench_split.py [--max-chars 2000] [--repeat 3] [--no-libraries] [--json PATH]

Corpora come from the reference corpora folder (`$DATACLEAN_SHARED_DATA`, see
`benchmarks/corpus.py`): English = WikiText-2 articles and Project Gutenberg books (both
detokenized) and raw Common Crawl pages; Chinese = CMRC 2018 Wikipedia paragraphs (5 to a
document) and 红楼梦 chapters. Without that folder, generated text stands in (and the figures say
so). Every figure is one core, the median of `--repeat` timed rounds (min-max beside it), after
the same untimed warm-up run of every case on the first two documents; the cases run round-robin
so that all see the same load, and dataclean and each library get the same input, warm-up and
rounds. Each is reported next to references measured in the same run on the same text, since the
machines are shared and absolute speeds drift:
`str.split()` (one C pass over the text), one regex pass finding terminator characters, the clean
stage (split's neighbour in the default pipeline, to show split is not its slowest stage), and the
PyPI sentence splitters the rules were measured against, on a 150 KB sample of the documents over
the budget, where installed (benchmark-only, optional: `pip install pysbd sentencex blingfire`).

Agreement: on the same sample, the share of pysbd's sentence ends that `split_sentences` also
finds (recall) and the share of ours that pysbd also finds (precision). Neither is ground truth;
large disagreement would point at a rule to check. Against a truth: how many cases of the English
golden rules (the split tests' fixture, expected sentences from pragmatic segmenter and pySBD)
each splitter gives exactly.

`--json PATH` also writes, per language and library, `split_sentences` against the library on the
same sample (speed and peak memory above the input, see benchmarks/measure.py) for run_all.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpus import SHARED as DATA
from benchmarks.measure import Measurement, PeakMemory, comparison, write_json
from dataclean.stages.clean import CleanText
from dataclean.stages.split import SplitLongDocuments, chunk_text, split_sentences

LIBRARY_SAMPLE_BYTES = 150_000


def detokenize(text: str) -> str:
    """Undo WikiText/NLTK tokenization (" , " -> ", ", " @-@ " -> "-") to get prose back."""
    text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    text = re.sub(r" ([.,;:!?%)\]'])", r"\1", text)
    text = re.sub(r"([(\[$]) ", r"\1", text)
    return text.replace(" n't", "n't").replace(" 's", "'s").replace("`` ", '"').replace(" ''", '"')


def english_docs() -> list[str]:
    docs: list[str] = []
    for name in ("valid.txt", "test.txt"):
        raw = (DATA / "en" / "wikitext2" / name).read_text(encoding="utf-8")
        for article in re.split(r"\n(?= = [^=])", raw):
            paragraphs = [detokenize(line.strip()) for line in article.split("\n") if line.strip()]
            if paragraphs:
                docs.append("\n\n".join(paragraphs))
    for book in sorted((DATA / "en" / "gutenberg").glob("*.txt")):
        lines = [detokenize(line) for line in book.read_text(encoding="utf-8").split("\n")]
        paragraphs = [" ".join(lines[i : i + 6]) for i in range(0, len(lines), 6)]
        for i in range(0, len(paragraphs), 40):
            docs.append("\n\n".join(paragraphs[i : i + 40]))
    web = DATA / "web" / "CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
    with gzip.open(web, "rt", encoding="utf-8") as lines:
        docs.extend(json.loads(line)["text"] for line in lines)
    return docs


def chinese_docs() -> list[str]:
    paragraphs = (DATA / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text("utf-8")
    lines = [line for line in paragraphs.split("\n") if line]
    docs = ["\n\n".join(lines[i : i + 5]) for i in range(0, len(lines), 5)]
    novel = (DATA / "zh" / "hongloumeng" / "hongloumeng.txt").read_text(encoding="utf-8")
    docs.extend(chapter for chapter in re.split(r"\n(?=\s*\S*卷 第)", novel) if chapter.strip())
    return docs


def generated_docs(lang: str, count: int = 400, seed: int = 0) -> list[str]:
    """Stand-in text when the reference data is absent: random sentences, paragraphs, lengths."""
    rng = random.Random(seed)
    words = ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "it", "at"]
    han = [chr(code) for code in range(0x4E00, 0x4E00 + 3000)]
    docs = []
    for _ in range(count):
        paragraphs = []
        for _ in range(rng.randint(1, 12)):
            sentences = []
            for _ in range(rng.randint(1, 8)):
                if lang == "en":
                    body = " ".join(rng.choice(words) for _ in range(rng.randint(5, 30)))
                    sentences.append(body.capitalize() + rng.choice([".", ".", "?", "!"]) + " ")
                else:
                    parts = ["".join(rng.choices(han, k=rng.randint(4, 15))) for _ in range(3)]
                    sentences.append("，".join(parts) + rng.choice("。。！？"))
            paragraphs.append("".join(sentences).rstrip())
        docs.append("\n\n".join(paragraphs))
    return docs


def timed_rounds(
    cases: dict[str, Callable[[], object]], repeat: int, memory: dict[str, float] | None = None
) -> dict[str, list[float]]:
    """Seconds of each case in each of `repeat` rounds, run round-robin (case after case) so that
    all see the same load on a shared machine; every case gets the same rounds.
    `memory`, if given, receives each case's peak memory above its start (MiB, max of rounds)."""
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_ in range(repeat):
        # Each round starts one case later, so that no case is always the first (or last) run.
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            with PeakMemory() as peak:
                start = time.perf_counter()
                cases[name]()
                seconds[name].append(time.perf_counter() - start)
            if memory is not None and peak.megabytes is not None:
                memory[name] = max(memory.get(name, 0.0), peak.megabytes)
    return seconds


def sentence_ends(pieces: list[str]) -> set[int]:
    """End offsets of the pieces' non-whitespace text (so whitespace handling does not count)."""
    ends, position = set(), 0
    for piece in pieces:
        ends.add(position + len(piece.rstrip()))
        position += len(piece)
    return ends


def aligned_pieces(segment: Callable[[str], list[str]], text: str) -> list[str]:
    """pysbd's sentences as consecutive pieces of `text` (its char_span offsets drift, so each
    segment is found in the text after the previous one)."""
    pieces, position = [], 0
    for sentence in segment(text):
        found = text.find(sentence.strip(), position)
        if found < 0:
            continue
        end = found + len(sentence.strip())
        pieces.append(text[position:end])
        position = end
    pieces.append(text[position:])
    return pieces


def library_segmenters(lang: str) -> dict[str, Callable[[str], Any]]:
    """Sentence splitters from PyPI that are installed (benchmark-only, all optional)."""
    found: dict[str, Callable[[str], Any]] = {}
    try:
        import pysbd

        found["pysbd 0.3"] = pysbd.Segmenter(language=lang, clean=False).segment
    except ImportError:
        pass
    try:
        import sentencex

        found["sentencex"] = lambda text: list(sentencex.segment(lang, text))
    except ImportError:
        pass
    try:
        import blingfire

        found["blingfire"] = blingfire.text_to_sentences_and_offsets
    except ImportError:
        pass
    return found


GOLDEN_EN = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "split" / "golden_en.jsonl"


def sentence_texts(segment: Callable[[str], Any]) -> Callable[[str], list[str]]:
    """A splitter's sentences as stripped strings (blingfire's come as offsets)."""

    def sentences(text: str) -> list[str]:
        found = segment(text)
        if isinstance(found, tuple):  # blingfire: (text, [(start, end), ...])
            found = [text[start:end] for start, end in found[1]]
        return [str(piece).strip() for piece in found if str(piece).strip()]

    return sentences


def golden_agreement(libraries: bool) -> None:
    """Print how many cases of the English golden rules (pragmatic segmenter's golden rules, more of
    its English spec and pySBD's regression cases: the split tests' fixture, expected sentences
    written by those projects) each splitter gives exactly."""
    cases = [json.loads(line) for line in GOLDEN_EN.open(encoding="utf-8")]
    splitters: dict[str, Callable[[str], Any]] = {"split_sentences": split_sentences}
    if libraries:
        splitters.update(library_segmenters("en"))
    scores = []
    for name, segment in splitters.items():
        sentences = sentence_texts(segment)
        right = sum(sentences(case["text"]) == [e.strip() for e in case["expected"]] for case in cases)
        scores.append(f"{name} {right}")
    print(f"English golden rules ({len(cases)} cases, exact sentences): {', '.join(scores)}\n")


def report(lang: str, docs: list[str], max_chars: int, repeat: int, libraries: bool) -> list[dict[str, Any]]:
    """Print one language's speeds against the references, chunk figures and pysbd agreement;
    return split_sentences against each library on the library sample (run_all's rows)."""
    size = sum(len(doc.encode("utf-8")) for doc in docs)
    long_docs = [doc for doc in docs if len(doc) > max_chars]
    long_size = sum(len(doc.encode("utf-8")) for doc in long_docs)
    table = pa.table({"id": [f"d{i}" for i in range(len(docs))], "text": docs})
    stage = SplitLongDocuments(max_chars=max_chars)
    clean = CleanText()  # the stage before split in the default pipeline, for comparison
    terminators = re.compile(r"[.!?。！？；．]")
    print(f"[{lang}] {len(docs)} docs, {size / 1e6:.1f} MB; {len(long_docs)} over budget")
    sample: list[str] = []  # what the stage really splits: documents over the budget
    total = 0
    for doc in long_docs:
        if total > LIBRARY_SAMPLE_BYTES:
            break
        sample.append(doc)
        total += len(doc.encode("utf-8"))

    def cases_for(
        docs: list[str], long_docs: list[str], table: pa.Table, sample: list[str]
    ) -> dict[str, Callable[[], object]]:
        found: dict[str, Callable[[], object]] = {
            "reference: str.split()": lambda: [doc.split() for doc in docs],
            "reference: one regex pass (terminators)": lambda: [terminators.findall(doc) for doc in docs],
            "split_sentences (all docs)": lambda: [split_sentences(doc) for doc in docs],
            "chunk_text (docs over budget)": lambda: [
                chunk_text(doc, max_chars=max_chars) for doc in long_docs
            ],
            "SplitLongDocuments stage (all docs)": lambda: stage(table),
            "reference: CleanText stage (all docs)": lambda: clean(table),
        }
        if segmenters:
            found["split_sentences (library sample)"] = lambda: [split_sentences(doc) for doc in sample]
        for library, segment in segmenters.items():
            found[labels[library]] = lambda segment=segment: [segment(doc) for doc in sample]
        return found

    segmenters = library_segmenters(lang) if libraries else {}
    labels = {
        library: f"reference: {library} ({len(sample)} long docs, {total // 1000} KB)"
        for library in segmenters
    }
    # The same untimed warm-up for every case: the first two documents (imports, caches, JIT).
    for function in cases_for(docs[:2], long_docs[:2], table.slice(0, 2), sample[:2]).values():
        function()
    cases = cases_for(docs, long_docs, table, sample)
    sizes = dict.fromkeys(cases, size)
    sizes["chunk_text (docs over budget)"] = long_size
    for name in cases:
        if name == "split_sentences (library sample)" or name in labels.values():
            sizes[name] = total
    memory: dict[str, float] = {}
    rounds = timed_rounds(cases, repeat, memory)
    seconds = {name: statistics.median(values) for name, values in rounds.items()}
    speeds = {name: sizes[name] / seconds[name] for name in cases}
    by_split = speeds["reference: str.split()"]
    by_clean = speeds["reference: CleanText stage (all docs)"]
    print(f"{'':4}{'what':58}{'MB/s':>8}{'(min-max)':>14}{'x str.split':>13}{'x clean':>9}")
    for name, speed in speeds.items():
        spread = f"({sizes[name] / max(rounds[name]) / 1e6:.1f}-{sizes[name] / min(rounds[name]) / 1e6:.1f})"
        print(f"{'':4}{name:58}{speed / 1e6:8.1f}{spread:>14}{speed / by_split:13.3f}{speed / by_clean:9.2f}")
    if segmenters:
        ours = speeds["split_sentences (library sample)"]
        for library, label in labels.items():
            print(f"    split_sentences / {library} on the same sample: {ours / speeds[label]:.1f}x")
    out = stage(table)
    longest = max(len(text) for text in out.column("text").to_pylist())
    chunks = out.num_rows - table.num_rows + len(long_docs)
    print(
        f"    rows {table.num_rows} -> {out.num_rows} ({chunks} chunks from the long docs); ",
        end="",
    )
    print(f"longest chunk {longest} chars (budget {max_chars})")
    if "pysbd 0.3" in segmenters:
        ours_total = theirs_total = both = 0
        for doc in sample:
            ours = sentence_ends(split_sentences(doc))
            theirs = sentence_ends(aligned_pieces(segmenters["pysbd 0.3"], doc))
            ours_total += len(ours)
            theirs_total += len(theirs)
            both += len(ours & theirs)
        print(
            f"    agreement with pysbd: recall {both / theirs_total:.3f}, precision "
            f"{both / ours_total:.3f} ({theirs_total} pysbd sentence ends, {ours_total} ours)"
        )
    print()
    rows = []
    corpus = f"{lang}: {len(sample)} docs over the budget, {total / 1e6:.2f} MB (the libraries' sample)"
    for library, label in labels.items():
        ours = "split_sentences (library sample)"
        rows.append(
            comparison(
                f"split sentences {lang}",
                corpus,
                Measurement(
                    "split_sentences", len(sample), total / 1e6, seconds[ours], peak_mb=memory.get(ours)
                ),
                Measurement(library, len(sample), total / 1e6, seconds[label], peak_mb=memory.get(label)),
            )
        )
    stage_name = "SplitLongDocuments stage (all docs)"
    stage_speed = Measurement(
        stage_name, len(docs), size / 1e6, seconds[stage_name], peak_mb=memory.get(stage_name)
    )
    return [{"row": row, "stage": stage_speed} for row in rows] or [{"row": None, "stage": stage_speed}]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--max-chars", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds of every case")
    parser.add_argument("--no-libraries", action="store_true", help="skip pysbd & co.")
    parser.add_argument("--json", help="also write the comparisons here (for run_all.py)")
    args = parser.parse_args()
    real = DATA.is_dir()
    corpora = {
        "en": english_docs() if real else generated_docs("en"),
        "zh": chinese_docs() if real else generated_docs("zh"),
    }
    print(f"data: {DATA if real else 'generated (no reference data found)'}")
    print(f"budget: max_chars={args.max_chars}; median of {args.repeat} rounds, same warm-up; one core\n")
    golden_agreement(not args.no_libraries)
    rows, stages = [], {}
    for lang, docs in corpora.items():
        found = report(lang, docs, args.max_chars, args.repeat, not args.no_libraries)
        rows += [item["row"] for item in found if item["row"] is not None]
        stages[lang] = asdict(found[0]["stage"])
    if args.json:
        write_json(args.json, rows, stage=stages)


if __name__ == "__main__":
    main()
