"""FineWeb-2's per-language thresholds and stop words, as tables of the quality stage.

FineWeb-2 (huggingface/fineweb-2, Apache-2.0) filters each language with datatrove's Gopher
repetition, FineWeb quality and Gopher quality filters, configured from one YAML per language and
script (`configs/spa_Latn.yml`): `dup_line_frac`, `top_n_grams`, `dup_n_grams`, `line_punct_thr`,
`new_line_ratio`, `min/max_avg_word_length`, `max_non_alpha_words_ratio` and `stopwords`. Its
pipeline (`fineweb-2-pipeline.py`) also turns the paragraph rules and `dup_line_char_frac` off,
disables `short_line_thr` (999), sets `char_duplicates_ratio` to 0.1 and `min_stop_words` to 2,
and runs no C4 filter: `thresholds.json`'s `fineweb2.pipeline` holds those settings.

The configs of the languages lid.176 labels ship in `dataclean/data/quality/fineweb2/`
(`configs.json`, values as in the YAML; `lid176.tsv`, each label's config and why; built by
`scripts/build_fineweb2_tables.py`). `fineweb2_tables()` gives each label's table: the `default`
table with the pipeline's settings, the config's values, its script's settings (Han text: jieba's
words, as the `zh` table counts; Japanese: SudachiPy's, `dataclean.quality.japanese`), and the
word style of the tokenizer FineWeb-2 counts its words with (`dataclean.quality.tokenizer.STYLES`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from dataclean.quality.chars import TABLES
from dataclean.quality.tokenizer import STYLES

FOLDER = TABLES / "fineweb2"


@lru_cache(maxsize=1)
def _labels() -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for line in (FOLDER / "lid176.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            label, config, _why, styles = line.split("\t")
            if config != "-":
                bits = sum(STYLES[name] for name in styles.split(",") if name != "-")
                out[label] = (config, bits)
    return out


def label_configs() -> dict[str, str]:
    """lid.176 label -> FineWeb-2 config name, for the labels that have one."""
    return {label: config for label, (config, _bits) in _labels().items()}


def style_bits(names: list[str] | int) -> int:
    """Word style names (`thresholds.json`) as the tokenizer's bits."""
    return names if isinstance(names, int) else sum(STYLES[name] for name in names)


def word_style(label: str) -> int:
    """The word style bits of a label's tokenizer (`dataclean.quality.tokenizer.STYLES`; 0 for a
    label without a config)."""
    return _labels().get(label, ("", 0))[1]


@lru_cache(maxsize=1)
def configs() -> dict[str, dict[str, Any]]:
    """The shipped FineWeb-2 configs by name, values as FineWeb-2's YAML has them."""
    loaded: dict[str, dict[str, Any]] = json.loads((FOLDER / "configs.json").read_text(encoding="utf-8"))
    return loaded


def thresholds(config: dict[str, Any]) -> dict[str, Any]:
    """One FineWeb-2 config as the stage's threshold names (`top_2_gram`, `duplicated_5_n_grams`...)."""
    out: dict[str, Any] = {
        name: config[name]
        for name in (
            "dup_line_frac",
            "line_punct_thr",
            "new_line_ratio",
            "min_avg_word_length",
            "max_avg_word_length",
            "max_non_alpha_words_ratio",
        )
    }
    out.update({f"top_{n}_gram": value for n, value in config["top_n_grams"]})
    out.update({f"duplicated_{n}_n_grams": value for n, value in config["dup_n_grams"]})
    out["stop_words"] = list(config["stopwords"])
    return out


def fineweb2_tables(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each lid.176 label's table overrides (on top of `default`): `settings` is
    `thresholds.json`'s `fineweb2` section (`pipeline`, and `scripts` by ISO 15924 code)."""
    shipped = configs()
    tables = {}
    for label, (name, style) in _labels().items():
        script = settings["scripts"].get(name.rsplit("_", 1)[1], {})
        tables[label] = {
            **settings["pipeline"],
            **thresholds(shipped[name]),
            **script,
            "fineweb2_config": name,
            # the tokenizer's styles and the script's (Han: jieba's words, as FineWeb-2 counts)
            "word_style": style | style_bits(script.get("word_style", [])),
        }
    return tables
