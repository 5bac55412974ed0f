"""The pii stage: personal data planted into real web and Wikipedia text is replaced, look-alikes
that fail their checks stay, rows excluded before the stage are redacted when written, and the
local and Ray executors decide the same."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dataclean import columns as C
from dataclean.errors import ConfigError
from dataclean.executors.local import LocalExecutor
from dataclean.io.readers import ReadOptions
from dataclean.run import run_pipeline
from dataclean.stages.clean import CleanText
from dataclean.stages.pii import RedactPersonalData
from dataclean.text.pii import Redactor, card_shape, id_number_valid, luhn_valid, redact_text
from tests.conftest import FIXTURE_ROOT, read_rows, sample_web_texts, write_jsonl

FIXTURES = FIXTURE_ROOT
SKIP = ReadOptions(on_error="skip")  # the reader excludes bad rows instead of failing the run
ZH = [p for p in (FIXTURES / "dedup" / "zh_paragraphs.txt").read_text().splitlines() if p.strip()]


def _id_number(rng: random.Random, valid: bool = True) -> str:
    body = f"{rng.randint(110000, 659000)}{rng.randint(1950, 2010)}{rng.randint(1, 12):02d}"
    body += f"{rng.randint(1, 28):02d}{rng.randint(0, 999):03d}"
    right = next(c for c in "0123456789X" if id_number_valid(body + c))
    return body + (right if valid else next(c for c in "0123456789" if c != right))


def _card(rng: random.Random, valid: bool = True) -> str:
    body = "4" + "".join(str(rng.randint(0, 9)) for _ in range(14))
    right = next(c for c in "0123456789" if luhn_valid(body + c))
    return body + (right if valid else str((int(right) + 1) % 10))


def _planted(rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, span, how it is written into Chinese text) for one of every kind."""
    mobile = f"1{rng.choice('3456789')}{rng.randint(0, 999999999):09d}"
    card = _card(rng)
    return [
        ("email", f"user{rng.randint(1, 999)}.name@mail-{rng.randint(1, 99)}.com", "邮箱{}。"),
        (
            "ip",
            f"{rng.choice([8, 23, 45, 81, 104])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.7",
            "服务器{}，",
        ),
        ("ip", f"2606:4700:{rng.randint(1, 9999):x}::1111", "地址{}，"),
        ("phone", mobile, "手机{}，"),
        ("phone", f"+44 20 7946 {rng.randint(1000, 9999)}", "电话{}；"),
        ("id_number", _id_number(rng), "身份证号{}，"),
        ("card", card, "卡号{}。"),
        ("card", " ".join(card[k : k + 4] for k in range(0, 16, 4)), "card {} ok"),
    ]


LOOK_ALIKES = [
    "身份证号{}，".format("110105194912310021"),  # check character wrong (X is right)
    "order 2023100512345678 shipped",  # 16 digits, fails Luhn
    "订单号13812345678901已发货",  # 14 digits: no mobile inside a longer number
    "on 2023-01-15 and 20230115, at 12:30:45",
    "Python 2.7.18, version 1.2.3.4, v10.0.0.1, build 8.0.1.27165",
    "hosts 192.168.1.20, 10.0.0.1, 127.0.0.1, 172.16.5.4, 169.254.1.1, 192.0.2.33",
    "IPv6 2001:db8::1, fd12:3456:789a::1, fe80::1, ::1 and std::vector<int>",
    "ISBN 9787020002207, barcode 31223125214735, tel 010-12345678",
    "齿式是：上颚1-3.1.4.2；下颚3.1.4.2-3。",
]


def test_planted_personal_data_in_real_text_is_replaced_and_counted() -> None:
    rng = random.Random(7)
    hosts = sample_web_texts()[:40] + ZH[:40]
    redactor = Redactor()
    for number, host in enumerate(hosts):
        kind, span, form = _planted(rng)[number % 8]
        cut = len(host) // 2
        text = host[:cut] + form.format(span) + host[cut:]
        before = redactor.redact(host)[1]  # real text may hold some of its own
        redacted, counts = redactor.redact(text)
        assert span not in redacted, (kind, span)
        assert counts.get(kind, 0) == before.get(kind, 0) + 1, (kind, span, counts, before)
        assert redacted.count(f"<{kind.upper()}>") == counts[kind]


def test_look_alikes_that_fail_their_checks_stay() -> None:
    for text in LOOK_ALIKES:
        assert redact_text(text) == text


def test_checks_against_known_numbers() -> None:
    # GB 11643's published example and the card networks' documented test numbers.
    assert id_number_valid("11010519491231002X") and not id_number_valid("110105194912310021")
    for number in ("4111111111111111", "5500005555555559", "378282246310005", "6212345678901232"):
        assert luhn_valid(number) and card_shape(number), number
    assert not luhn_valid("4111111111111112")
    assert not card_shape("31223125214735")  # a library barcode passes Luhn, not the issuer rule


def test_version_strings_private_and_documentation_addresses_stay() -> None:
    text = "from 8.8.8.8 and 1.1.1.1 (not 10.1.2.3, 2001:db8::5) via 2a00:1450:4001:80b::200e"
    assert redact_text(text) == "from <IP> and <IP> (not 10.1.2.3, 2001:db8::5) via <IP>"


def test_emails_and_ips_agree_with_datatrove_on_real_web_text() -> None:
    formatters = pytest.importorskip("datatrove.pipeline.formatters")
    theirs = formatters.PIIFormatter(email_replacement="<EMAIL>", ip_replacement="<IP>")
    ours = Redactor(("email", "ip"))
    rng = random.Random(3)
    texts = []
    for host in sample_web_texts()[:100]:
        plant = f" write to {rng.choice(['ann', 'li.wei', 'o_neil'])}{rng.randint(1, 99)}@example.org from "
        texts.append(host[:200] + plant + f"{rng.randint(11, 99)}.{rng.randint(0, 255)}.3.4 " + host[200:])
    same = sum(theirs.format(text) == ours.redact(text)[0] for text in texts)
    assert same / len(texts) >= 0.98


def test_stage_adds_count_column_and_never_drops() -> None:
    table = pa.table({C.ID: ["a", "b"], C.TEXT: ["mail me: a.b@example.com, 手机13912345678", "nothing"]})
    out = RedactPersonalData(kinds=("email",), email_placeholder="[email]")(table)
    assert out.column(C.TEXT).to_pylist() == ["mail me: [email], 手机13912345678", "nothing"]
    assert out.column(C.PII_REDACTED).to_pylist() == [1, 0]
    assert C.DROP_REASON not in out.column_names
    with pytest.raises(ConfigError, match=r"pii\.kinds"):
        RedactPersonalData(kinds=("email", "name"))


def _corpus(tmp_path: Path) -> tuple[Path, list[str]]:
    rng = random.Random(11)
    rows: list[dict[str, Any]] = []
    spans = []
    for number, host in enumerate(sample_web_texts()[:30] + ZH[:10]):
        _, span, form = _planted(rng)[number % 8]
        spans.append(span)
        rows.append({"id": f"r{number}", "text": host[:300] + form.format(span) + host[300:600]})
    # Rows that clean excludes (garbage, empty after cleaning) and the reader excludes (no text).
    spans += ["junk.sender@example.net", "13712345678", "broken.json@example.com"]
    rows.append({"id": "garbage", "text": "\x01\x02\x03\x04\x05 junk.sender@example.net " + "\x06" * 60})
    rows.append({"id": "notext", "text": 13712345678})
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    with path.open("a") as f:
        f.write('{"id": "broken", "text": "mail broken.json@example.com\n')
    return path, spans


def _everything_written(out: Path) -> str:
    parts = [json.dumps(read_rows(out / folder), ensure_ascii=False) for folder in ("data", "excluded")]
    return "".join(parts) + (out / "report.html").read_text() + (out / "stats.json").read_text()


@pytest.mark.parametrize("executor_name", ["local", "ray"])
def test_nothing_written_holds_personal_data(tmp_path: Path, executor_name: str, request: Any) -> None:
    source, spans = _corpus(tmp_path)
    executor = LocalExecutor() if executor_name == "local" else request.getfixturevalue("ray_executor")
    out = tmp_path / "out"
    stats = run_pipeline([str(source)], str(out), [CleanText(), RedactPersonalData()], executor, SKIP)
    written = _everything_written(out)
    leaked = [span for span in spans if span in written]
    assert leaked == []
    excluded = {row[C.ID]: row for row in read_rows(out / "excluded")}
    assert "<EMAIL>" in excluded["garbage"][C.TEXT]
    reasons = {row[C.REASON] for row in excluded.values()}
    assert {"clean:garbage", "read:non_string_text", "read:invalid_json"} <= reasons
    counts = next(s for s in stats["stages"] if s["stage"] == "pii")["counts"]
    assert sum(counts.values()) == sum(row[C.PII_REDACTED] for row in read_rows(out / "data"))
    assert counts["email"] >= 5 and counts["phone"] >= 5 and counts["card"] >= 5


def test_local_and_ray_decide_the_same(tmp_path: Path, ray_executor: Any) -> None:
    source, _ = _corpus(tmp_path)
    outputs = []
    for name, executor in (("local", LocalExecutor()), ("ray", ray_executor)):
        run_pipeline([str(source)], str(tmp_path / name), [CleanText(), RedactPersonalData()], executor, SKIP)
        rows = read_rows(tmp_path / name / "data") + read_rows(tmp_path / name / "excluded")
        outputs.append(sorted((row[C.ID], row[C.TEXT], row.get(C.PII_REDACTED)) for row in rows))
    assert outputs[0] == outputs[1]
