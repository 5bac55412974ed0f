"""Benchmark the quality stage against datatrove's four filters: agreement, Chinese rates, speed.

    python benchmarks/bench_quality.py [--data PATH] [--rounds 3] [--repeat 2] [--json PATH]
        [--docs N] [--sections agreement,chinese,speed,speed_chinese,languages,speed_japanese]

1. Agreement with datatrove 0.10 (GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter,
   FineWebQualityFilter, defaults, spaCy blank `en`; each filter on the text as given, as the
   stage runs C4 in filter mode: `dataclean.quality.reference`) on the reference folder's 697
   Common Crawl pages and on English documents built from the pages datatrove keeps to trip each
   rule (`dataclean.quality.planted.english_trips`): the keep/drop decision, and the first reason
   among the rows both drop. The stage runs with `language=en` (datatrove's English thresholds on
   every row, as datatrove's defaults do), plus the share of pages whose words equal spaCy's.
2. Chinese, with the default per-language tables: clean CMRC 2018 Wikipedia paragraphs and 红楼梦
   passages (boilerplate lines left out, 800+ characters), share dropped; junk built from them
   (`dataclean.quality.planted`: repeated sentences, duplicated paragraphs, a dominating short
   phrase, punctuation-free line lists; 300 each), share dropped, under the labels `zh`, `ja`, `en`.
3. Speed, MB/s per core (one process), on the Common Crawl pages (`--repeat` copies): the stage on
   one Arrow batch against datatrove's four filters over datatrove Documents in the same process,
   the same warm-up (one untimed pass over the first 50 documents each) and `--rounds` timed
   rounds, round-robin (`benchmarks/rounds.py`); the ratio is per round, median and min-max.
   Twice: with `language=en` (datatrove's thresholds on every page, as the agreement is measured)
   and as a run labels the pages (`labeled`: each language's table, Chinese segmented).
4. Chinese speed: the default stage on the CMRC 2018 paragraphs labeled `zh` (every Han run cut
   by the compiled segmenter) against datatrove's three filters as FineWeb-2 configures them for
   Mandarin (spaCy `zh` with jieba), same rounds.
5. Languages: on the Common Crawl pages as the language stage labels them, per language other
   than English, keep/drop agreement of the default stage with datatrove configured as FineWeb-2
   configures that language (`dataclean.quality.reference.fineweb2_filters`), and the pages
   dropped for stop words that FineWeb-2 keeps. Korean's reference (datatrove's Kiwi `sbg`
   model) needs kiwipiepy < 0.22 with its model (`pip install --target DIR kiwipiepy==0.21.0
   kiwipiepy_model==0.21.0`, then `PYTHONPATH=DIR`); without it ko is listed as `no_tokenizer`.
6. Japanese speed: the default stage on the pages labeled `ja` (10 copies; SudachiPy's words, the
   `ja` extra), SudachiPy's words alone, and datatrove's filters as FineWeb-2 configures Japanese
   (spaCy `ja` over SudachiPy), same rounds.

`--thresholds zh.duplicated_10_n_grams=0.127,...` gives the chinese and languages sections' stage
those table entries (what another threshold would keep and drop).
`--docs N` uses the first N Common Crawl pages (a quick check; the figures use all of them),
`--sections` runs only the sections named (all by default).
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import corpus  # noqa: E402
from benchmarks.measure import Measurement, comparison, write_json  # noqa: E402
from benchmarks.rounds import describe, round_ratios, spread, timed_rounds  # noqa: E402
from dataclean import columns as C  # noqa: E402
from dataclean.lang import identify_languages  # noqa: E402
from dataclean.quality import planted  # noqa: E402
from dataclean.quality.reference import (  # noqa: E402
    datatrove_available,
    datatrove_filters,
    datatrove_reasons,
    fineweb2_filters,
)
from dataclean.quality.tokenizer import words  # noqa: E402
from dataclean.stages.quality import FilterQuality  # noqa: E402


def _reasons(stage: FilterQuality, texts: list[str], lang: str | None = None) -> list[str | None]:
    table = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts})
    if lang is not None:
        table = table.append_column(C.LANG, pa.array([lang] * len(texts), pa.string()))
    reasons: list[str | None] = stage(table).column(C.DROP_REASON).to_pylist()
    return reasons


def agreement(texts: list[str]) -> dict[str, Any]:
    """Keep/drop and first-reason agreement with datatrove on `texts` (section 1)."""
    theirs = datatrove_reasons(texts)
    ours = _reasons(FilterQuality(language="en"), texts)
    same = sum((a is None) == (b is None) for a, b in zip(ours, theirs, strict=True))
    both = [(a, b) for a, b in zip(ours, theirs, strict=True) if a is not None and b is not None]
    differ = collections.Counter((a, b) for a, b in zip(ours, theirs, strict=True) if a != b)
    return {
        "documents": len(texts),
        "keep_drop": same / len(texts),
        "first_reason": sum(a == b for a, b in both) / max(1, len(both)),
        "dropped_by_datatrove": sum(b is not None for b in theirs),
        "disagreements": [f"ours {a} / datatrove {b}: {n}" for (a, b), n in differ.most_common(8)],
    }


def spacy_words(texts: list[str]) -> float:
    """Share of texts whose words equal spaCy blank `en`'s (datatrove's `split_into_words`)."""
    from datatrove.utils.text import split_into_words

    same: int = sum(words(t) == split_into_words(t) for t in texts)
    return same / len(texts)


def chinese_sets(seed: int = 0) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Clean Chinese passages by source, and junk built from them by kind (section 2)."""
    cmrc = [
        line
        for line in corpus.SHARED.joinpath("zh/cmrc2018/cmrc2018_contexts_dedup.txt").read_text().splitlines()
        if line.strip()
    ]
    lines = corpus.SHARED.joinpath("zh/hongloumeng/hongloumeng.txt").read_text().splitlines()
    heading = re.compile(r"\s*(上卷|下卷)?\s*第.{1,4}回")
    body = [line for line in lines if line.strip() and "手机电子书" not in line and not heading.match(line)]
    novel, current = [], []
    for line in body:
        current.append(line)
        if sum(map(len, current)) > 800:
            novel.append("\n".join(current))
            current = []
    junk = planted.chinese_junk(cmrc + novel, random.Random(seed), 300)
    return {"cmrc2018": cmrc, "hongloumeng": novel}, junk


def chinese(thresholds: tuple[str, ...] = ()) -> dict[str, Any]:
    """Share dropped of each Chinese set (section 2), the stage given `thresholds` entries."""
    clean, junk = chinese_sets()
    stage = FilterQuality(thresholds=thresholds)
    found: dict[str, Any] = {}
    for name, texts in clean.items():
        reasons = _reasons(stage, texts, "zh")
        found[f"clean {name}"] = {
            "documents": len(texts),
            "dropped": sum(r is not None for r in reasons) / len(texts),
            "reasons": dict(collections.Counter(r for r in reasons if r).most_common(6)),
        }
    total = sum(len(t) for t in clean.values())
    found["clean all"] = sum(found[f"clean {n}"]["dropped"] * len(t) for n, t in clean.items()) / total
    for name, texts in junk.items():
        for lang in ("zh", "ja", "en"):
            reasons = _reasons(stage, texts, lang)
            found[f"{name} as {lang}"] = sum(r is not None for r in reasons) / len(texts)
    return found


def speed(texts: list[str], rounds: int) -> dict[str, Any]:
    """MB/s per core of the stage and of datatrove's four filters on `texts` (section 3)."""
    from datatrove.data import Document

    size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    stage = FilterQuality(language="en")
    batch = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts})
    filters = datatrove_filters()

    def run_datatrove(documents: list[str]) -> None:
        for index, text in enumerate(documents):
            for step in filters:
                if step.filter(Document(text=text, id=str(index))) is not True:
                    break

    # The default stage on the pages as the language stage labels them: each language's table,
    # Chinese cut into jieba's words by the compiled segmenter (segmentation on).
    labels = identify_languages(pa.array(texts, pa.string()))[0]
    labeled = batch.append_column(C.LANG, labels)
    default = FilterQuality()
    stage(batch.slice(0, 50))
    default(labeled)  # warm: the segmenter's tables load on the first batch holding Han text
    run_datatrove(texts[:50])
    seconds = timed_rounds(
        {
            "dataclean": lambda: stage(batch),
            "dataclean_labeled": lambda: default(labeled),
            "datatrove": lambda: run_datatrove(texts),
        },
        rounds,
        0,
    )
    ratios = round_ratios(seconds["datatrove"], seconds["dataclean"])
    labeled_ratios = round_ratios(seconds["datatrove"], seconds["dataclean_labeled"])
    ours = Measurement(
        "FilterQuality (language=en)",
        len(texts),
        size,
        statistics.median(seconds["dataclean"]),
        rounds=seconds["dataclean"],
    )
    theirs = Measurement(
        "datatrove Gopher+C4+FineWeb filters",
        len(texts),
        size,
        statistics.median(seconds["datatrove"]),
        rounds=seconds["datatrove"],
    )
    return {
        "row": comparison("quality filters", "Common Crawl pages", ours, theirs),
        "megabytes": size,
        "dataclean_mb_s": spread([size / s for s in seconds["dataclean"]]),
        "datatrove_mb_s": spread([size / s for s in seconds["datatrove"]]),
        "ratio": spread(ratios),
        "ratio_text": describe(ratios, 1, "x"),
        "labeled_mb_s": spread([size / s for s in seconds["dataclean_labeled"]]),
        "labeled_ratio_text": describe(labeled_ratios, 1, "x"),
    }


def languages(texts: list[str], thresholds: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per language lid.176 labels on `texts` (not `en`, `und`): keep/drop agreement of the default
    stage with datatrove configured as FineWeb-2 configures that language (section 5), and the
    pages dropped for stop words that FineWeb-2 keeps; languages whose datatrove tokenizer does
    not load here are listed apart."""
    from dataclean.quality.fineweb2 import label_configs

    labels = identify_languages(pa.array(texts, pa.string()))[0].to_pylist()
    batch = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts, C.LANG: labels})
    ours = FilterQuality(thresholds=thresholds)(batch).column(C.DROP_REASON).to_pylist()
    by_language: dict[str, list[int]] = collections.defaultdict(list)
    for index, label in enumerate(labels):
        if label not in ("en", "und") and label in label_configs():
            by_language[label].append(index)
    found: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for label, rows in sorted(by_language.items(), key=lambda item: -len(item[1])):
        try:
            theirs = datatrove_reasons([texts[i] for i in rows], fineweb2_filters(label_configs()[label]))
        except (ImportError, OSError) as error:
            missing[label] = str(error)[:80]
            continue
        pairs = [(ours[i], reason) for i, reason in zip(rows, theirs, strict=True)]
        found[label] = {
            "pages": len(rows),
            "same": sum((a is None) == (b is None) for a, b in pairs),
            "stop_words_only_here": sum(a == "gopher_enough_stop_words" and b is None for a, b in pairs),
        }
    return {"languages": found, "no_tokenizer": missing}


def chinese_speed(rounds: int) -> dict[str, Any]:
    """MB/s of the default stage on CMRC 2018 paragraphs labeled `zh` (every Han run segmented)
    against datatrove's filters as FineWeb-2 configures them for Mandarin (jieba in Python)."""
    from datatrove.data import Document

    texts = chinese_sets()[0]["cmrc2018"]
    size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    batch = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts, C.LANG: ["zh"] * len(texts)})
    stage = FilterQuality()
    filters = fineweb2_filters("cmn_Hani")

    def run_datatrove() -> None:
        for index, text in enumerate(texts):
            for step in filters:
                if step.filter(Document(text=text, id=str(index))) is not True:
                    break

    stage(batch.slice(0, 20))
    for step in filters:  # jieba's dictionary loads on the first document
        step.filter(Document(text=texts[0], id="warm"))
    seconds = timed_rounds({"dataclean": lambda: stage(batch), "datatrove": run_datatrove}, rounds, 0)
    return {
        "megabytes": size,
        "dataclean_mb_s": spread([size / s for s in seconds["dataclean"]]),
        "datatrove_mb_s": spread([size / s for s in seconds["datatrove"]]),
        "ratio_text": describe(round_ratios(seconds["datatrove"], seconds["dataclean"]), 1, "x"),
    }


def japanese_speed(web: list[str], rounds: int, copies: int = 10) -> dict[str, Any]:
    """MB/s of the default stage on the pages the language stage labels `ja` (`copies` times; each
    row's words are SudachiPy's, cut in Python), of SudachiPy's words alone, and of datatrove's
    filters as FineWeb-2 configures Japanese (spaCy `ja` over SudachiPy), same rounds (section 6)."""
    from datatrove.data import Document

    from dataclean.quality.japanese import word_spans

    labels = identify_languages(pa.array(web, pa.string()))[0].to_pylist()
    texts = [text for text, label in zip(web, labels, strict=True) if label == "ja"] * copies
    size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    batch = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts, C.LANG: ["ja"] * len(texts)})
    stage = FilterQuality()
    filters = fineweb2_filters("jpn_Jpan")

    def run_datatrove() -> None:
        for index, text in enumerate(texts):
            for step in filters:
                if step.filter(Document(text=text, id=str(index))) is not True:
                    break

    stage(batch.slice(0, 5))
    for step in filters:  # SudachiPy's dictionary loads on the first document
        step.filter(Document(text=texts[0], id="warm"))
    seconds = timed_rounds(
        {
            "dataclean": lambda: stage(batch),
            "sudachi_words": lambda: [word_spans(t) for t in texts],
            "datatrove": run_datatrove,
        },
        rounds,
        0,
    )
    return {
        "documents": len(texts),
        "megabytes": size,
        "dataclean_mb_s": spread([size / s for s in seconds["dataclean"]]),
        "sudachi_words_mb_s": spread([size / s for s in seconds["sudachi_words"]]),
        "datatrove_mb_s": spread([size / s for s in seconds["datatrove"]]),
        "ratio_text": describe(round_ratios(seconds["datatrove"], seconds["dataclean"]), 1, "x"),
    }


SECTIONS = ("agreement", "chinese", "speed", "speed_chinese", "languages", "speed_japanese")


def english_agreement(web: list[str]) -> dict[str, Any]:
    """Section 1: agreement on the pages, on English documents built to trip each rule, and the
    share of pages whose words equal spaCy's."""
    kept = [t for t, r in zip(web, datatrove_reasons(web), strict=True) if r is None]
    paragraphs = [
        p.strip()
        for t in kept
        for p in re.split(r"\n+", t)
        if len(p.split()) > 40 and len(planted.sentences(p)) >= 3
    ]
    trips = planted.english_trips(paragraphs, random.Random(3))
    return {
        "agreement_common_crawl": agreement(web),
        "agreement_english_trips": agreement(list(trips.values())),
        "spacy_words_common_crawl": spacy_words(web),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus.add_data_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="copies of the Common Crawl pages timed")
    parser.add_argument("--json", help="also write the results here (for run_all.py)")
    parser.add_argument("--docs", type=int, default=0, help="the first N Common Crawl pages (0: all)")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help="comma-separated, of " + ",".join(SECTIONS)
    )
    parser.add_argument(
        "--thresholds",
        default="",
        help="LANG.NAME=VALUE entries (comma-separated) for the chinese and languages sections' stage, "
        "as quality.thresholds takes them (to measure another table, e.g. zh.duplicated_10_n_grams=0.127)",
    )
    args = parser.parse_args()
    thresholds = tuple(entry for entry in args.thresholds.split(",") if entry)
    sections = args.sections.split(",")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"--sections: unknown {', '.join(unknown)} (known: {', '.join(SECTIONS)})")
    corpus.use_data(args.data)
    if not datatrove_available():
        raise SystemExit("datatrove and spaCy are needed (pip install -e .[bench])")
    web = corpus.web_docs()[: args.docs or None]
    results: dict[str, Any] = {}
    if "agreement" in sections:
        results.update(english_agreement(web))
    if "chinese" in sections:
        results["chinese"] = chinese(thresholds)
    if "speed" in sections:
        results["speed"] = speed(web * args.repeat, args.rounds)
    if "speed_chinese" in sections:
        results["speed_chinese"] = chinese_speed(args.rounds)
    if "languages" in sections:
        results["languages"] = languages(web, thresholds)
    if "speed_japanese" in sections:
        results["speed_japanese"] = japanese_speed(web, args.rounds)
    for name, value in results.items():
        print(
            f"{name}: {value}"
            if name != "speed"
            else f"speed: { {k: v for k, v in value.items() if k != 'row'} }"
        )
    if args.json:
        rows = [results["speed"].pop("row")] if "speed" in results else []
        write_json(args.json, rows, **results)


if __name__ == "__main__":
    main()
