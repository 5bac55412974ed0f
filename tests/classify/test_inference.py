"""dataclean's fastText inference against fastText's own predict, on every supervised model shape.

The models are trained here by fastText (skipped when only the predict-only build is installed),
on real text; a shipped tiny model with fastText's recorded outputs runs without fastText.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dataclean.classify.models import WHOLE_TEXT, label_probability
from dataclean.classify.train import MIN_THREADS
from dataclean.lang.fasttext import predict, read_model, utf8_buffers
from dataclean.lang.fasttext_projected import projection_pays
from dataclean.lang.model_file import LOSS_HS, LOSS_NS, LOSS_OVA, LOSS_SOFTMAX
from tests.conftest import sample_web_texts

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY = FIXTURES / "classify" / "tiny_hs_bigram.ftz"


def _lines(name: str) -> list[str]:
    return [line for line in (FIXTURES / "lm" / name).read_text(encoding="utf-8").splitlines() if line]


def _trainer() -> Any:
    fasttext = pytest.importorskip("fasttext")
    if not hasattr(fasttext, "train_supervised"):
        pytest.skip("fastText's trainer is not installed (pip install fasttext-numpy2)")
    return fasttext


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 3-label training file of real text, and held-out texts (web pages, edge cases)."""
    english, chinese, boilerplate = (
        _lines("wikitext2_test_en.txt"),
        _lines("cmrc2018_heldout_zh.txt"),
        _lines("boilerplate_en.txt"),
    )
    folder = tmp_path_factory.mktemp("fasttext")
    train = folder / "train.txt"
    with train.open("w", encoding="utf-8") as sink:
        for label, texts in (("hq", english[:150]), ("zh", chinese[:60]), ("lq", boilerplate[:80])):
            sink.writelines(f"__label__{label} {' '.join(text.split())}\n" for text in texts)
    held_out = [
        *english[150:190],
        *chinese[60:80],
        *boilerplate[80:],
        *(text[:5000] for text in sample_web_texts()[:40]),
        "",
        "x",
        "two\nlines",
        "a literal </s> ends the line here",
        "__label__hq is not a word",
        "tab\tand\rcarriage",
    ]
    return {"folder": folder, "train": str(train), "texts": held_out}


def _vectors(fasttext: Any, corpus: dict[str, Any], dim: int) -> str:
    """Pretrained word vectors (.vec) trained here by fastText's skipgram."""
    words = fasttext.train_unsupervised(
        corpus["train"], model="skipgram", dim=dim, epoch=1, minCount=1, thread=MIN_THREADS
    )
    path = corpus["folder"] / f"vectors{dim}.vec"
    with path.open("w", encoding="utf-8") as sink:
        sink.write(f"{len(words.words)} {dim}\n")
        for word in words.words:
            sink.write(word + " " + " ".join(f"{v:.6f}" for v in words.get_word_vector(word)) + "\n")
    return str(path)


SHAPES: dict[str, dict[str, Any]] = {
    "softmax, words": {"loss": "softmax", "wordNgrams": 1},
    "softmax, bigrams": {"loss": "softmax", "wordNgrams": 2},
    "hs, bigrams, char 2-5-grams": {"loss": "hs", "wordNgrams": 2, "minn": 2, "maxn": 5},
    "one-vs-all, bigrams": {"loss": "ova", "wordNgrams": 2},
    "negative sampling, trigrams, char 3-4-grams": {"loss": "ns", "wordNgrams": 3, "minn": 3, "maxn": 4},
    "softmax, bigrams, pretrained vectors": {"loss": "softmax", "wordNgrams": 2, "pretrained": True},
    "softmax, bigrams, quantized .ftz": {"loss": "softmax", "wordNgrams": 2, "quantize": True},
    "hs, bigrams, char n-grams, quantized .ftz": {
        "loss": "hs",
        "wordNgrams": 2,
        "minn": 3,
        "maxn": 5,
        "quantize": True,
    },
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_probabilities_equal_fasttext_predict(shape: str, corpus: dict[str, Any]) -> None:
    fasttext = _trainer()
    options = dict(SHAPES[shape])
    quantize, pretrained = options.pop("quantize", False), options.pop("pretrained", False)
    if pretrained:
        options["pretrainedVectors"] = _vectors(fasttext, corpus, 16)
    model = fasttext.train_supervised(
        corpus["train"], dim=16, epoch=5, bucket=50_000, thread=MIN_THREADS, verbose=0, **options
    )
    path = corpus["folder"] / ("model.ftz" if quantize else "model.bin")
    if quantize:
        model.quantize(input=corpus["train"], retrain=False, cutoff=5000, qnorm=True, dsub=2)
    model.save_model(str(path))

    ours = read_model(path)
    expected_loss = {"softmax": LOSS_SOFTMAX, "hs": LOSS_HS, "ova": LOSS_OVA, "ns": LOSS_NS}[options["loss"]]
    assert (ours.loss, ours.word_ngrams) == (expected_loss, options["wordNgrams"])
    assert ours.pruned == quantize
    texts = corpus["texts"]
    data, offsets = utf8_buffers(pa.array(texts, pa.string()))
    found = predict(ours, data, offsets, WHOLE_TEXT, tuple(ours.labels))
    compared = 0
    theirs = np.zeros_like(found.wanted_prob)
    for row, text in enumerate(texts):
        labels, probabilities = model.predict(text.replace("\n", " "), k=-1, threshold=0.0)
        assert len(labels) >= 1
        for label, probability in zip(labels, probabilities, strict=True):
            column = ours.labels.index(label.removeprefix("__label__"))
            assert found.wanted_prob[row, column] == np.float32(probability), (shape, text[:60], label)
            theirs[row, column] = probability
            compared += 1
        top_label, top_probability = model.predict(text.replace("\n", " "), k=1)
        assert ours.labels[found.top[row]] == top_label[0].removeprefix("__label__")
        assert found.top_prob[row] == np.float32(top_probability[0])
    assert compared >= len(texts) * 2
    # exact=False: softmax and hierarchical softmax through the projected rows, fastText's
    # probabilities to its float32 rounding (measured here: at most 1.2e-7); the sigmoid losses
    # stay on the exact path.
    projected = predict(ours, data, offsets, WHOLE_TEXT, tuple(ours.labels), exact=False)
    assert projection_pays(ours) == (options["loss"] in ("softmax", "hs"))
    assert np.abs(projected.wanted_prob - theirs).max() <= 1e-6
    if not projection_pays(ours):
        assert np.array_equal(projected.wanted_prob, found.wanted_prob)
    ordered = np.sort(theirs, axis=1)
    clear = ordered[:, -1] - ordered[:, -2] > 1e-5  # no near-tie between the two best labels
    assert np.array_equal(projected.top[clear], found.top[clear])


def test_shipped_model_equals_recorded_fasttext_outputs() -> None:
    """Runs without fastText: its outputs for this file were recorded when the model was made."""
    records = [json.loads(line) for line in (FIXTURES / "classify" / "tiny_hs_bigram_fasttext.jsonl").open()]
    model = read_model(TINY)
    assert model.pruned and model.word_ngrams == 2 and model.loss == LOSS_HS and model.maxn == 5
    texts = pa.array([record["text"] for record in records], pa.string())
    for label in ("hq", "lq"):
        ours = label_probability(model, texts, label)
        theirs = [record["probabilities"].get(label) for record in records]
        compared = [(o, t) for o, t in zip(ours, theirs, strict=True) if t is not None]
        assert len(compared) >= len(records) - 5
        assert all(np.float32(o) == np.float32(t) for o, t in compared)
        projected = label_probability(model, texts, label, exact=False)  # the projected rows
        assert all(abs(p - t) <= 1e-6 for p, t in zip(projected, theirs, strict=True) if t is not None)


def test_label_defaults_to_the_first_and_unknown_labels_are_named() -> None:
    model = read_model(TINY)
    texts = pa.array(["The committee published its annual report.", "Click here to subscribe"])
    assert np.array_equal(
        label_probability(model, texts, None), label_probability(model, texts, model.labels[0])
    )
    with pytest.raises(Exception, match="not a label of the model"):
        label_probability(model, texts, "nope")
