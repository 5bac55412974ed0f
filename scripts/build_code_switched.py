"""Build `tests/fixtures/quality/zh_code_switched.jsonl`: a Chinese technical article with English
terms and code blocks, cut into pieces as a pipeline would see them.

    python scripts/build_code_switched.py --data PATH [--out tests/fixtures/quality/zh_code_switched.jsonl]

Real Chinese prose with English terms: the CMRC 2018 paragraphs (`PATH/zh/cmrc2018/`) with the most
Latin words per character (software, operating systems, music), in that order. Real code: seven
snippets copied from installed packages (accelerate's DeepSpeed ZeRO-3 test, transformers'
`TrainingArguments.set_training` docstring and `get_linear_schedule_with_warmup` signature, pandas'
`DataFrame.boxplot` and `read_csv` docstrings, torch's `clip_grad_norm_` signature and `LambdaLR`
docstring), each as a fenced block after the first sentence of every second paragraph. The article is
cut at Chinese sentence ends (。！？) into pieces of about 400 characters; a code block stays whole,
in a piece with only the sentence that introduces it (the hardest case for a language label).
Each row: `id`, `text`, `has_code` (the piece holds a code block).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
from pathlib import Path

TARGET = 400


def snippets() -> list[str]:
    """The code blocks, read from the installed packages (so they are their authors' code)."""
    import accelerate.test_utils.scripts.external_deps.test_zero3_integration as zero3
    import pandas.plotting._core as pandas_plot
    import torch.nn.utils.clip_grad as clip
    import transformers.training_args as training_args

    zero = inspect.getsource(zero3.init_torch_dist_then_launch_deepspeed).splitlines()
    start = next(i for i, line in enumerate(zero) if "deepspeed_config = {" in line)
    deepspeed = "\n".join(line[4:] for line in zero[start : start + 11])
    source = inspect.getsource(training_args.TrainingArguments.set_training).splitlines()
    first = next(i for i, line in enumerate(source) if "args = TrainingArguments(" in line)
    trainer = "\n".join(line.strip() for line in source[first : first + 4])
    plot = inspect.getsource(pandas_plot.boxplot_frame).splitlines()
    first = next(i for i, line in enumerate(plot) if "rng = np.random.default_rng" in line)
    boxplot = "\n".join(line.strip() for line in plot[first : first + 5])
    signature = inspect.getsource(clip.clip_grad_norm_).splitlines()
    first = next(i for i, line in enumerate(signature) if line.startswith("def clip_grad_norm_"))
    last = next(i for i, line in enumerate(signature) if line.rstrip().endswith(":") and i > first)
    grad = "\n".join(signature[first : last + 1])
    import pandas.io.parsers.readers as readers
    import torch.optim.lr_scheduler as lr_scheduler
    import transformers.optimization as optimization

    doc = inspect.getsource(readers).splitlines()
    first = next(i for i, line in enumerate(doc) if '>>> pd.read_csv("data.csv")' in line)
    csv = "\n".join(line.strip().removeprefix(">>> ") for line in doc[first : first + 1])
    warmup = inspect.getsource(optimization.get_linear_schedule_with_warmup).splitlines()[0]
    lambdas = inspect.getsource(lr_scheduler.LambdaLR).splitlines()
    first = next(i for i, line in enumerate(lambdas) if ">>> num_epochs = 100" in line)
    schedule = "\n".join(line.strip().removeprefix(">>> ") for line in lambdas[first : first + 8])
    blocks = [deepspeed, trainer, boxplot, grad, csv, warmup, schedule]
    return [f"```python\n{block}\n```" for block in blocks]


def article(data: Path, paragraphs: int = 16) -> str:
    """CMRC paragraphs richest in Latin words, with a code block after every second one."""
    lines = (data / "zh" / "cmrc2018" / "cmrc2018_contexts_dedup.txt").read_text(encoding="utf-8")
    rows = [line for line in lines.splitlines() if len(line) >= 300]
    rows.sort(key=lambda p: -len(re.findall(r"[A-Za-z]{2,}", p)) / len(p))
    code = snippets()
    parts: list[str] = []
    for index, paragraph in enumerate(rows[:paragraphs]):
        parts.append(paragraph)
        if index % 2 == 1 and index // 2 < len(code):
            # the block follows the paragraph's first sentence, as a post introduces its code
            lead, sep, rest = paragraph.partition("。")
            parts[-1] = lead + sep
            parts.append(code[index // 2])
            if rest:
                parts.append(rest)
    return "\n\n".join(parts)


def pieces(text: str) -> list[str]:
    """Cut at sentence ends into pieces of about `TARGET` characters; code blocks stay whole."""
    units = re.findall(r"```.*?```\n*|[^。！？`]*[。！？]+\n*|[^。！？`]+\n*", text, flags=re.S)
    out: list[str] = []
    current: list[str] = []
    for unit in units:
        if unit.startswith("```"):
            # the block goes with the one sentence that introduces it, in a piece of their own
            if len(current) > 1:
                out.append("".join(current[:-1]).strip())
            out.append(("".join(current[-1:]) + unit).strip())
            current = []
            continue
        if current and sum(map(len, current)) + len(unit) > TARGET:
            out.append("".join(current).strip())
            current = []
        current.append(unit)
    if "".join(current).strip():
        out.append("".join(current).strip())
    # a paragraph's short tail joins the piece before it, as a cut to about 400 characters would
    merged: list[str] = []
    for piece in (p for p in out if p):
        if merged and len(piece) < TARGET // 2 and "```" not in piece:
            merged[-1] += "\n\n" + piece
        else:
            merged.append(piece)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="reference data folder (zh/cmrc2018/)")
    parser.add_argument(
        "--out", type=Path, default=Path("tests/fixtures/quality/zh_code_switched.jsonl"), help="output"
    )
    args = parser.parse_args()
    rows = [
        {"id": f"piece-{k}", "text": piece, "has_code": "```" in piece}
        for k, piece in enumerate(pieces(article(args.data)))
    ]
    with args.out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} pieces, {sum(r['has_code'] for r in rows)} with code -> {args.out}")


if __name__ == "__main__":
    main()
