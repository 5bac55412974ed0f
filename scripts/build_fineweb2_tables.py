"""Build the quality stage's FineWeb-2 tables: `dataclean/data/quality/fineweb2/{configs.json,lid176.tsv}`.

    python scripts/build_fineweb2_tables.py --configs PATH/fineweb2/configs

FineWeb-2 (huggingface/fineweb-2, Apache-2.0) ships one YAML of filter thresholds and stop words
per language and script (`spa_Latn.yml`, `cmn_Hani.yml`, 1,929 of them). The stage labels with
lid.176, whose labels are ISO 639-1 codes (or 639-3 where there is none): each label gets the one
config of its ISO 639-3 code (`dataclean/data/lang/iso639_3_to_lid176.tsv` names the code of a
2-letter label), or the config `lid176_choices.tsv` names (macrolanguages, several scripts, codes
that differ; `-` for none). `lid176.tsv` records every label's config and why; `configs.json`
holds the configs those labels use, values as the YAML has them (`stopwords`, `top_n_grams`,
`dup_n_grams`, ...), so the stage never needs the YAML files or a YAML parser.

`lid176.tsv` also records how the word tokenizer FineWeb-2 uses for the config (datatrove's
`load_word_tokenizer(config)`, a spaCy blank tokenizer for most languages) cuts words where it
differs from spaCy's English one, probed on a few strings (`PROBES`): the word style names of
`dataclean.quality.tokenizer.STYLES`. Needs the `bench` extra (datatrove, spaCy).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "dataclean" / "data"
OUT = DATA / "quality" / "fineweb2"


def _rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


def mapping(configs: Path) -> list[tuple[str, str, str]]:
    """(lid.176 label, FineWeb-2 config or `-`, why) for every label of lid.176."""
    by_code: dict[str, list[str]] = defaultdict(list)
    for path in sorted(configs.glob("*.yml")):
        by_code[path.stem.split("_")[0]].append(path.stem)
    codes: dict[str, list[str]] = defaultdict(list)
    for code, label, _name in _rows(DATA / "lang" / "iso639_3_to_lid176.tsv"):
        codes[label].append(code)
    chosen = {label: (config, why) for label, config, why in _rows(OUT / "lid176_choices.tsv")}
    labels = (DATA / "lang" / "lid176_labels.txt").read_text(encoding="utf-8").split()
    out = []
    for label in labels:
        if label in chosen:
            out.append((label, *chosen[label]))
            continue
        own = codes[label] + ([label] if len(label) == 3 else [])
        candidates = [config for code in own for config in by_code[code]]
        if len(candidates) != 1:
            raise SystemExit(f"{label}: configs {candidates}; name one in lid176_choices.tsv")
        out.append((label, candidates[0], "the one config of its ISO 639-3 code"))
    return out


# Word style -> (probe text, the words that show the style).
PROBES = {
    "no_english_specials": ("dont", ["dont"]),
    "elision": ("l'uomo", ["l'", "uomo"]),
    "brackets": ("Historie[rediger", ["Historie", "[", "rediger"]),
    "digit_period": ("am 12. Mai", ["am", "12.", "Mai"]),
    "french": ("grand-père dit-il", ["grand-père", "dit", "-il"]),  # dataclean/quality/french.py
}


def word_styles(config: str) -> str:
    """The word styles of datatrove's tokenizer for `config` (comma-separated; `-` for none or a
    tokenizer that is not spaCy's)."""
    from datatrove.utils.word_tokenizers import SpaCyTokenizer, load_word_tokenizer

    try:
        tokenizer = load_word_tokenizer(config)
    except (ValueError, ImportError):  # no tokenizer assigned, or one needing another package
        return "-"
    if not isinstance(tokenizer, SpaCyTokenizer):
        return "-"
    found = [name for name, (text, expected) in PROBES.items() if tokenizer.word_tokenize(text) == expected]
    lower, upper = tokenizer.word_tokenize("abc-def"), tokenizer.word_tokenize("abc-Def")
    if lower == ["abc-def"]:
        found.append("no_hyphen")
    elif upper == ["abc-Def"]:
        found.append("hyphen_lower")
    return ",".join(found) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=Path, required=True, help="FineWeb-2's configs/ folder")
    args = parser.parse_args()
    rows = mapping(args.configs)
    used = sorted({config for _, config, _ in rows if config != "-"})
    tables = {
        name: yaml.safe_load((args.configs / f"{name}.yml").read_text(encoding="utf-8")) for name in used
    }
    (OUT / "configs.json").write_text(
        json.dumps(tables, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8"
    )
    header = (
        "# lid.176 label, FineWeb-2 config (- none), why, word styles of its tokenizer "
        "(scripts/build_fineweb2_tables.py)\n"
    )
    lines = ["\t".join([*row, word_styles(row[1]) if row[1] != "-" else "-"]) + "\n" for row in rows]
    (OUT / "lid176.tsv").write_text(header + "".join(lines), encoding="utf-8")
    print(f"{len(rows)} labels, {len(used)} configs -> {OUT}")


if __name__ == "__main__":
    main()
