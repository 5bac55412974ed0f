"""Benchmark the decontaminate stage against datatrove's n-gram decontamination, same text, same run.

    python benchmarks/bench_decontaminate.py [--data PATH] [--rounds 3] [--items 100000]

Eval sets, from real text: `wikitext` (WikiText-2 test paragraphs, first 700 characters) and
`cmrc2018` (24-character question-like spans of CMRC 2018 Wikipedia paragraphs, sentences with 20+
Han characters). Corpus: the 697 Common Crawl pages, 红楼梦 paragraphs and Gutenberg passages as
clean rows, and every eval item planted into a web page (English) or a novel paragraph (Chinese),
whole and edited (English: two words replaced and punctuation changed; Chinese: one character
replaced).

- Recall (planted rows flagged and attributed to their item) and clean rows flagged, for
  dataclean (word 13-grams, character 10-grams) and for datatrove's `NGramsDecontFilter` in its
  default configuration (`NGramsDecontConfig`: 12-grams of its word tokenizer, spaCy's English
  one, or the Chinese one for the Chinese set), both indexing the same items. Agreement: the rows
  both flag, one flags, neither flags.
- Speed, MB/s in one process, the same warm-up and round-robin rounds (benchmarks/rounds.py):
  dataclean's stage on Arrow batches against `NGramsDecontFilter.filter` on datatrove Documents
  (its index loaded once, outside the timing). Its xxh64 hash gets the n-gram's UTF-8 bytes:
  datatrove 0.10.1 passes the `str`, which the xxhash 4 package refuses.
- Scale: building the index of `--items` eval items (200-character windows of the reference text),
  seconds and peak memory above the start (resident set, psutil), and the index's size on disk.
"""

from __future__ import annotations

import argparse
import posixpath
import random
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import corpus
from benchmarks.rounds import describe, round_ratios, timed_rounds
from dataclean import columns as C
from dataclean.contamination.evalsets import EvalSet
from dataclean.contamination.index import build_index
from dataclean.io.writers import write_json
from dataclean.stages.decontaminate import DropContaminated

BATCH = 2048


def _question(paragraph: str) -> str | None:
    for sentence in re.split("[。！？]", paragraph):
        if len(re.findall(r"[\u4e00-\u9fff]", sentence[:24])) >= 20:
            return sentence[:24]
    return None


def _wikitext() -> list[str]:
    text = (corpus.SHARED / "en" / "wikitext2" / "test.txt").read_text()
    paragraphs = [
        p.strip() for p in text.split("\n") if len(p.strip()) > 400 and not p.strip().startswith("=")
    ]
    return [re.sub(r" ([,.;:)])", r"\1", p).replace(" @-@ ", "-")[:700] for p in paragraphs]


def _gutenberg() -> list[str]:
    passages = []
    for path in sorted((corpus.SHARED / "en" / "gutenberg").glob("*.txt")):
        lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        passages += [" ".join(lines[k : k + 8]) for k in range(0, min(len(lines), 480), 8)]
    return passages


def materials() -> dict[str, Any]:
    rng = random.Random(1)
    web = [text for text in corpus.web_docs() if text.strip()]
    text = (corpus.SHARED / "zh" / "hongloumeng" / "hongloumeng.txt").read_text()
    novel = [p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) > 200]
    cmrc = (corpus.SHARED / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text().splitlines()
    questions = dict(list({f"cmrc-{k}": q for k, p in enumerate(cmrc) if (q := _question(p))}.items())[:500])
    passages = {f"wiki-{k}": p for k, p in enumerate(_wikitext()[:500])}
    planted: list[tuple[str, str]] = []
    for number, (item, text) in enumerate(questions.items()):
        at = rng.randrange(len(text))
        for variant in (text, text[:at] + "某" + text[at + 1 :]):
            host = novel[number % len(novel)]
            cut = rng.randrange(len(host))
            planted.append((host[:cut] + variant + host[cut:], item))
    for number, (item, text) in enumerate(passages.items()):
        words = text.split(" ")
        for _ in range(2):
            words[rng.randrange(len(words))] = "something"
        for variant in (text, " ".join(words).replace(",", ";")):
            host = web[number % len(web)]
            cut = host.find(" ", rng.randrange(len(host))) + 1
            planted.append((host[:cut] + variant + " " + host[cut:], item))
    clean = web + novel + _gutenberg()
    return {"questions": questions, "passages": passages, "planted": planted, "clean": clean}


def _write_eval_sets(folder: Path, questions: dict[str, str], passages: dict[str, str]) -> str:
    import json

    (folder / "cmrc2018.jsonl").write_text(
        "".join(json.dumps({"id": k, "question": q}, ensure_ascii=False) + "\n" for k, q in questions.items())
    )
    (folder / "wikitext.jsonl").write_text(
        "".join(json.dumps({"id": k, "passage": p}) + "\n" for k, p in passages.items())
    )
    return f"cmrc2018={folder / 'cmrc2018.jsonl'},wikitext={folder / 'wikitext.jsonl'}"


class Datatrove:
    """datatrove's NGramsDecontFilter over an index of the same items (per eval set its language)."""

    def __init__(self, folder: Path, questions: dict[str, str], passages: dict[str, str]) -> None:
        from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter
        from datatrove.utils.hashing import create_hash_func
        from datatrove.utils.text import ngrams, simplify_text
        from datatrove.utils.word_tokenizers import load_word_tokenizer

        config = NGramsDecontConfig()
        default = create_hash_func(config.hash_config)  # xxh64, which xxhash 4 refuses to give str

        def hash_func(text: str) -> int:
            return int(default(text.encode("utf-8")))

        self.owner: dict[int, str] = {}
        for name, items, language in (("cmrc2018", questions, "zh"), ("wikitext", passages, "en")):
            # What NGramsDecontIndexer.compute_hashes does with a text (the class needs lighteval).
            tokenizer = load_word_tokenizer(language)
            hashes = set()
            for item, text in items.items():
                words = tokenizer.word_tokenize(simplify_text(text, config.norm_config))
                for value in map(hash_func, map(" ".join, ngrams(words, config.n_grams))):
                    hashes.add(value)
                    self.owner.setdefault(value, item)
            (folder / "dt-index").mkdir(exist_ok=True)
            np.array(sorted(hashes), dtype="<u8").tofile(folder / "dt-index" / f"{name}.index.hashes")
        self.filters = [
            NGramsDecontFilter(str(folder / "dt-index"), config=config, language=language)
            for language in ("en", "zh")
        ]
        for step in self.filters:
            step.hash_func = hash_func
            step.load_index_hashes()

    def flagged(self, texts: list[str]) -> list[str | None]:
        """Per text, the item of the first contaminated n-gram either filter finds, else None."""
        from datatrove.data import Document

        found: list[str | None] = []
        for number, text in enumerate(texts):
            item = None
            for step in self.filters:
                doc = Document(text=text, id=str(number))
                if step.filter(doc) is not True:
                    item = self.owner.get(step.hash_func(doc.metadata["contaminated_ngram"]))
                    break
            found.append(item)
        return found


def ours_flagged(stage: DropContaminated, texts: list[str]) -> list[str | None]:
    found: list[str | None] = []
    for start in range(0, len(texts), BATCH):
        part = texts[start : start + BATCH]
        out = stage(pa.table({C.ID: [str(k) for k in range(len(part))], C.TEXT: part}))
        found += [
            records[0]["eval_item"] if records else None for records in out.column(C.RECORDS).to_pylist()
        ]
    return found


def quality(
    label: str, flagged: list[str | None], planted: list[tuple[str, str]], clean: int
) -> dict[str, Any]:
    hits = flagged[: len(planted)]
    rows: dict[str, Any] = {}
    for prefix, name in (("cmrc", "cmrc2018 (zh questions)"), ("wiki", "wikitext (en passages)")):
        pairs = [
            (found, item) for found, (_, item) in zip(hits, planted, strict=True) if item.startswith(prefix)
        ]
        rows[name] = sum(found == item for found, item in pairs) / len(pairs)
    false = sum(found is not None for found in flagged[len(planted) :])
    rows["clean rows flagged"] = f"{false}/{clean}"
    print(
        f"  {label}: "
        + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in rows.items())
    )
    return rows


def _peak_rss(action: Any) -> tuple[float, int]:
    import psutil

    process = psutil.Process()
    start = process.memory_info().rss
    peak = [start]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.perf_counter()
    action()
    seconds = time.perf_counter() - started
    done.set()
    watcher.join()
    return seconds, peak[0] - start


def scale(folder: Path, items: int, texts: list[str]) -> dict[str, Any]:
    import json

    stream = " ".join(texts)
    path = folder / "big.jsonl"
    with path.open("w") as f:
        for k in range(items):
            at = (k * 7919) % max(1, len(stream) - 200)
            f.write(json.dumps({"id": f"item-{k}", "text": stream[at : at + 200]}, ensure_ascii=False) + "\n")
    index = str(folder / "big-index")
    seconds, peak = _peak_rss(lambda: build_index([EvalSet("big", str(path))], (), 13, 10, index))
    size = sum(p.stat().st_size for p in Path(index).glob("*.*"))
    print(
        f"  index of {items:,} items: {seconds:.1f} s, peak memory +{peak / 1e6:.0f} MB, "
        f"{size / 1e6:.0f} MB on disk"
    )
    return {"items": items, "seconds": seconds, "peak_mb": peak / 1e6, "disk_mb": size / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    corpus.add_data_argument(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--speed-every", type=int, default=4, help="time every n-th row (datatrove is slow)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    corpus.use_data(args.data, args.generated)
    found = materials()
    texts = [text for text, _ in found["planted"]] + found["clean"]
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    print(
        f"{len(found['questions'])} questions, {len(found['passages'])} passages; "
        f"{len(found['planted'])} planted rows, {len(found['clean'])} clean rows, {megabytes:.1f} MB"
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        evals = _write_eval_sets(folder, found["questions"], found["passages"])
        stage = DropContaminated(evals=tuple(evals.split(",")), mode="annotate")
        stage.prepare(posixpath.join(scratch, "ours"))
        stage.setup()
        peer = Datatrove(folder, found["questions"], found["passages"])
        ours, theirs = ours_flagged(stage, texts), peer.flagged(texts)
        print("quality (recall: planted rows flagged and attributed to their item):")
        results = {
            "dataclean": quality("dataclean", ours, found["planted"], len(found["clean"])),
            "datatrove": quality("datatrove", theirs, found["planted"], len(found["clean"])),
        }
        both = sum(a is not None and b is not None for a, b in zip(ours, theirs, strict=True))
        only_ours = sum(a is not None and b is None for a, b in zip(ours, theirs, strict=True))
        only_theirs = sum(a is None and b is not None for a, b in zip(ours, theirs, strict=True))
        english = [k for k, (_, item) in enumerate(found["planted"]) if item.startswith("wiki")]
        english += list(range(len(found["planted"]), len(texts)))
        same = sum((ours[k] is None) == (theirs[k] is None) for k in english)
        print(
            f"  rows flagged by both {both}, only dataclean {only_ours}, only datatrove {only_theirs}; "
            f"same decision on English planted + clean rows: {same}/{len(english)}"
        )
        texts = texts[:: args.speed_every]  # the speed rounds: every n-th row, planted and clean
        megabytes = sum(len(t.encode()) for t in texts) / 1e6
        batches = [
            pa.table({C.ID: [str(k) for k in range(len(texts[s : s + BATCH]))], C.TEXT: texts[s : s + BATCH]})
            for s in range(0, len(texts), BATCH)
        ]
        seconds = timed_rounds(
            {"datatrove": lambda: peer.flagged(texts), "dataclean": lambda: [stage(b) for b in batches]},
            args.rounds,
        )
        ratios = round_ratios(seconds["datatrove"], seconds["dataclean"])
        print(
            f"speed on {len(texts)} rows, {megabytes:.1f} MB: "
            f"dataclean {describe([megabytes / s for s in seconds['dataclean']], 1, ' MB/s')}, "
            f"datatrove {describe([megabytes / s for s in seconds['datatrove']], 1, ' MB/s')}: "
            f"{describe(ratios)}x"
        )
        print("scale:")
        big = scale(folder, args.items, found["clean"])
        if args.json:
            write_json(str(args.json), {"quality": results, "ratio": ratios, "scale": big})


if __name__ == "__main__":
    main()
