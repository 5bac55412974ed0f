"""Benchmark the pii stage against datatrove's PIIFormatter on the same real text, same run.

    python benchmarks/bench_pii.py [--data PATH] [--repeat 4] [--rounds 5]

Corpus: the 697 Common Crawl documents and the Chinese Wikipedia/novel paragraphs (`--repeat`
copies). Speed, MB/s in one process, the same warm-up (one untimed pass) and rounds run
round-robin (benchmarks/rounds.py), median over rounds with the min-max of per-round ratios:
- dataclean's RedactPersonalData stage on Arrow batches of 2,048 rows, all five kinds, and with
  only the kinds datatrove has (email, ip);
- datatrove's `PIIFormatter.format` on every text (its best configuration: the formatter's own
  function, without datatrove's pipeline and Document objects around it).

Agreement where both detect the same kinds (emails, IPv4): each tool replaces with `<EMAIL>` and
`<IP>`; the share of documents whose outputs are identical, the spans each tool replaced, and the
differing documents with the first difference, so a reader can judge who is right.
"""

from __future__ import annotations

import argparse
import difflib

import pyarrow as pa

from benchmarks import corpus
from benchmarks.rounds import describe, round_ratios, timed_rounds
from dataclean import columns as C
from dataclean.stages.pii import RedactPersonalData
from dataclean.text.pii import Redactor

BATCH = 2048


def _first_difference(theirs: str, ours: str) -> str:
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, theirs, ours, autojunk=False).get_opcodes():
        if op != "equal":
            before, after = theirs[max(0, i1 - 25) : i2 + 25], ours[max(0, j1 - 25) : j2 + 25]
            return f"datatrove {before!r} | dataclean {after!r}"
    return ""


def agreement(texts: list[str]) -> None:
    from datatrove.pipeline.formatters import PIIFormatter

    theirs = PIIFormatter(email_replacement="<EMAIL>", ip_replacement="<IP>")
    ours = Redactor(("email", "ip"))
    same, spans, differing = 0, {"datatrove": [0, 0], "dataclean": [0, 0]}, []
    for text in texts:
        a, b = theirs.format(text), ours.redact(text)[0]
        for name, out in (("datatrove", a), ("dataclean", b)):
            spans[name][0] += out.count("<EMAIL>")
            spans[name][1] += out.count("<IP>")
        if a == b:
            same += 1
        else:
            differing.append(_first_difference(a, b))
    print(f"agreement on emails and IPs: {same}/{len(texts)} documents identical ({same / len(texts):.2%})")
    for name, (emails, ips) in spans.items():
        print(f"  {name}: {emails} emails, {ips} IPs replaced")
    for line in differing[:10]:
        print("  differs:", line.replace("\n", " "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    corpus.add_data_argument(parser)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    corpus.use_data(args.data, args.generated)
    texts = corpus.web_docs() + corpus.zh_docs() if corpus.have_shared() else corpus.generated_docs()
    agreement(texts)
    texts = texts * args.repeat
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    batches = [
        pa.table(
            {
                C.ID: [str(i) for i in range(k, k + BATCH)][: len(texts[k : k + BATCH])],
                C.TEXT: texts[k : k + BATCH],
            }
        )
        for k in range(0, len(texts), BATCH)
    ]
    from datatrove.pipeline.formatters import PIIFormatter

    formatter = PIIFormatter()
    every_kind = RedactPersonalData()
    same_kinds = RedactPersonalData(kinds=("email", "ip"))
    cases = {
        "datatrove PIIFormatter": lambda: [formatter.format(t) for t in texts],
        "dataclean pii (all kinds)": lambda: [every_kind(b) for b in batches],
        "dataclean pii (email, ip)": lambda: [same_kinds(b) for b in batches],
    }
    seconds = timed_rounds(cases, args.rounds)
    print(f"{len(texts)} documents, {megabytes:.1f} MB, {args.rounds} rounds")
    reference = seconds["datatrove PIIFormatter"]
    for name, values in seconds.items():
        rates = [megabytes / s for s in values]
        line = f"  {name}: {describe(rates, 1, ' MB/s')}"
        if name != "datatrove PIIFormatter":
            line += f", {describe(round_ratios(reference, values))} datatrove's speed"
        print(line)


if __name__ == "__main__":
    main()
