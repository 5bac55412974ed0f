"""The clean stage drops text that is not language (random bytes, binary read as text, base64 and
hex blobs) and keeps real text, short text and text in scripts no model covers, on labeled data:
real lines (fixtures, the bundled sample) against bytes made random here."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText, clean_text
from dataclean.text.noise import _CLASSES, char_class, class_table, log_ratios, noise_reason
from tests.conftest import FIXTURE_ROOT, SAMPLE, read_rows, sample_web_texts

FIXTURES = FIXTURE_ROOT / "clean"


def _fixture(name: str) -> list[str]:
    rows = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(row)["text"] for row in rows]


def _reasons(texts: list[str], **params: float) -> list[str | None]:
    table = pa.table({C.ID: [str(i) for i in range(len(texts))], C.TEXT: texts})
    return CleanText(**params)(table).column(C.DROP_REASON).to_pylist()  # type: ignore[arg-type]


def _random(rng: random.Random, size: int) -> bytes:
    return rng.randbytes(size)


def test_real_text_is_kept() -> None:
    """Real multilingual web lines (15 scripts), the sample's web pages, and words in scripts
    without a language model (CLDR: Cherokee, N'Ko, Vai, Tifinagh, Syriac, Ol Chiki, Yi...)."""
    texts = [*_fixture("multilingual_lines.jsonl"), *_fixture("cldr_scripts.jsonl"), *sample_web_texts()]
    reasons = _reasons(texts)
    dropped = [
        (r, t[:80]) for r, t in zip(reasons, texts, strict=True) if r in ("random_bytes", "encoded_data")
    ]
    # The sample's web-garbage row (random Latin-1 bytes), nothing else.
    assert [reason for reason, _ in dropped] == ["random_bytes"]
    assert dropped[0][1].startswith("\x0b\u00d9\x97P")


def test_short_text_is_never_judged() -> None:
    rng = random.Random(1)
    short = [_random(rng, 30).decode("latin-1") for _ in range(20)]
    assert all(noise_reason(clean_text(text)) is None for text in short if len(clean_text(text)) < 40)
    assert noise_reason("OK") is None and noise_reason("x" * 10) is None


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_random_bytes_are_dropped(encoding: str) -> None:
    rng = random.Random(2)
    texts = [_random(rng, size).decode(encoding, "replace") for size in (120, 400, 2000) for _ in range(20)]
    assert set(_reasons(texts)) == {"random_bytes"}


def test_binary_file_read_as_latin1_is_dropped() -> None:
    """The compiled numpy extension read as Latin-1, in 2 KB slices: most are random bytes; slices
    that are mostly the file's own message strings may stay."""
    [path] = Path(np.__file__).parent.glob("_core/_multiarray_umath*.so")
    raw = path.read_bytes()
    slices = [
        raw[start : start + 2048].decode("latin-1") for start in range(4096, len(raw) - 2048, len(raw) // 40)
    ]
    reasons = _reasons(slices)
    assert sum(r in ("random_bytes", "garbage") for r in reasons) >= 0.6 * len(slices)


def test_base64_and_hex_blobs_are_dropped() -> None:
    rng = random.Random(3)
    blobs = [
        base64.b64encode(_random(rng, 300)).decode(),
        base64.encodebytes(_random(rng, 900)).decode(),
        _random(rng, 200).hex(),
        "Attachment follows:\n" + base64.encodebytes(_random(rng, 3000)).decode(),
    ]
    assert _reasons(blobs) == ["encoded_data"] * 4
    # A hash or an id inside real text is not a blob.
    text = "The commit 3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a fixed it; see the log for why it mattered."
    assert _reasons([text]) == [None]


def test_checks_can_be_turned_off_and_are_validated() -> None:
    rng = random.Random(4)
    noise = _random(rng, 500).decode("latin-1")
    assert _reasons([noise], max_random_score=0.0) == [None]
    blob = base64.b64encode(noise.encode()).decode()
    assert _reasons([blob], max_encoded_fraction=1.0, max_random_score=0.0) == [None]
    with pytest.raises(ConfigError, match=r"clean\.max_random_score"):
        CleanText(max_random_score=-1)
    with pytest.raises(ConfigError, match=r"clean\.max_encoded_fraction"):
        CleanText(max_encoded_fraction=0)
    with pytest.raises(ConfigError, match=r"clean\.min_judged_chars"):
        CleanText(min_judged_chars=0)
    with pytest.raises(ConfigError, match=r"clean\.noise_sample_chars"):
        CleanText(noise_sample_chars=10)


def test_model_table_matches_the_classes() -> None:
    ratios = log_ratios()
    assert ratios.shape == (len(_CLASSES), len(_CLASSES))
    table = class_table()
    for char in "aZ9.+é\u00c9\u0436\u0416\u6587 \u00a7\u2014\U0001f600":
        assert table[ord(char)] == char_class(char)
    # Letters followed by letters: text in any script reads as text.
    assert ratios[_CLASSES.index("caseless_letter"), _CLASSES.index("caseless_letter")] < 0


def test_bundled_sample_drops_web_garbage_with_its_reason(tmp_path: Path) -> None:
    run_pipeline([str(SAMPLE)], str(tmp_path / "out"), [CleanText()], LocalExecutor())
    excluded = {row[C.ID]: row[C.REASON] for row in read_rows(tmp_path / "out" / "excluded")}
    assert excluded["web-garbage"] == "clean:random_bytes"
    assert not [
        i
        for i, reason in excluded.items()
        if reason in ("clean:random_bytes", "clean:encoded_data") and i != "web-garbage"
    ]
