"""Find personal data in text and replace each span with a typed placeholder.

Kinds (`KINDS`), each found by one alternative of a single compiled regex and then validated:
- `email`: datatrove's PIIFormatter pattern (RFC 5322 local part, dotted domain or a bracketed IP),
  with an ASCII `\\b`, so an address right after a Chinese character is found too (Python's
  Unicode `\\b` sees no boundary between `箱` and `a`).
- `ip`: IPv4 and IPv6 addresses that `ipaddress` calls global (`is_global`, as datatrove's
  `public_ip_validator`): private, loopback, link-local, documentation (192.0.2.0/24,
  2001:db8::/32), unique-local (fc00::/7) and other reserved ranges stay. An IPv4 address directly
  after a letter or after "version"/"ver."/"v"/"build"/"版本" is a version string, not an address.
- `phone`: E.164 numbers written with `+` (country code, then groups separated by spaces, dots,
  dashes or parentheses; 8-15 digits in all), and Chinese mobile numbers: `1[3-9]` and 9 more
  digits (11 in all; also grouped 3-4-4), found right against Chinese characters
  (`手机13812345678，`) but never inside a longer run of digits or letters.
- `id_number`: Chinese resident identity numbers (GB 11643-1999): 18 characters, a region code,
  a birth date from 1900 to 2099, a sequence number, and a check character (`0-9` or `X`) that
  must equal the ISO 7064 MOD 11-2 checksum of the first 17 digits.
- `card`: payment card numbers: 13-19 digits, written together or grouped by 4 (or Amex's 4-6-5)
  with spaces or dashes, with an issuer prefix and length of Visa, Mastercard, Amex, UnionPay,
  JCB, Diners or Discover (`card_shape`) and passing the Luhn check (ISO/IEC 7812).

Not detected: landline numbers without `+`, postal addresses, names, passport and other IDs,
IPv4-mapped IPv6 forms, numbers split across lines. A number that fails its check (an order
number, a date, a version string) stays as it is.

`Redactor` holds the compiled pattern for a choice of kinds and placeholders; `redact` returns the
new text and the count per kind. Rows are screened in bulk first (`candidates`: one RE2 pass over
the whole Arrow array), so the Python regex runs only on rows that may hold something.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KINDS = ("email", "ip", "phone", "id_number", "card")
PLACEHOLDERS = {
    "email": "<EMAIL>",
    "ip": "<IP>",
    "phone": "<PHONE>",
    "id_number": "<ID_NUMBER>",
    "card": "<CARD>",
}

_EMAIL = (
    # datatrove's pattern (pipeline/formatters/pii.py), its leading \b an ASCII one.
    r"(?a:\b)[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])"
)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
# Not inside a range of numbers (`1-3.1.4.2`, a dental formula) nor a longer dotted number.
_IPV4 = rf"(?<![0-9A-Za-z.])(?<![0-9]-){_OCTET}(?:\.{_OCTET}){{3}}(?![0-9]|[.-][0-9])"
_IPV6 = r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Za-z:])"
_PHONE_E164 = r"(?<![0-9A-Za-z+])\+[1-9][0-9]{0,2}(?:[ .-]?\(?[0-9]{1,5}\)?){1,5}(?![0-9])"
# One run of digits: an ID number, a Chinese mobile, a card number (kind decided by validation).
_DIGITS = (
    r"(?<![0-9A-Za-z.+-])"
    r"(?:[0-9]{4}(?:[ -][0-9]{4}){2}[ -][0-9]{1,7}|[0-9]{4}[ -][0-9]{6}[ -][0-9]{5}"
    r"|1[3-9][0-9][ -][0-9]{4}[ -][0-9]{4}|[0-9]{17}[0-9Xx]|[0-9]{11,19})"
    r"(?![0-9A-Za-z]|[.,][0-9])"
)
_VERSION_BEFORE = re.compile(r"(?<![A-Za-z])(?:version|ver\.?|v|release|build|版本)\s*$", re.IGNORECASE)

# What a row must contain for any kind to be there: screened in bulk with RE2 (pyarrow).
_SCREENS = {
    "email": r"@",
    "ip": r"[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]|[0-9A-Fa-f]?:[0-9A-Fa-f]{0,4}:",
    "phone": r"\+[1-9]|1[3-9][0-9][ -]?[0-9]{4}[ -]?[0-9]{4}",
    "id_number": r"[0-9]{17}",
    "card": r"[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}",
}

_ID_WEIGHTS = np.array([pow(2, 17 - i, 11) for i in range(17)])
_ID_SHAPE = re.compile(
    r"[1-9][0-9]{5}(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}[0-9X]"
)


def id_number_valid(number: str) -> bool:
    """A GB 11643-1999 resident identity number: shape, birth date range and check character."""
    number = number.upper()
    if len(number) != 18 or _ID_SHAPE.fullmatch(number) is None:
        return False
    total = int(np.dot(_ID_WEIGHTS, [int(c) for c in number[:17]]))
    return "10X98765432"[total % 11] == number[17]


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check of a digit string (ISO/IEC 7812-1)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _global_ip(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).is_global
    except ValueError:
        return False


def _digits_kind(span: str) -> str | None:
    """The kind of a run of digits (separators allowed), or None when no check passes."""
    digits = span.replace(" ", "").replace("-", "")
    if len(digits) == 18 and id_number_valid(digits):
        return "id_number"
    if len(digits) == 11 and digits[1] in "3456789" and digits[0] == "1":
        return "phone"
    return "card" if card_shape(digits) and luhn_valid(digits) else None


def card_shape(digits: str) -> bool:
    """Issuer prefix and length of a card number: Amex 34/37 (15 digits), Diners 30/36/38 (14),
    Visa 4 (13, 16-19), Mastercard, UnionPay, JCB, Discover 2/3/5/6 (16-19)."""
    if not digits.isdigit():
        return False
    length, first = len(digits), digits[0]
    if length == 15:
        return digits[:2] in ("34", "37")
    if length == 14:
        return digits[:2] in ("30", "36", "38")
    if length == 13:
        return first == "4"
    return 16 <= length <= 19 and first in "23456"


class Redactor:
    """Replaces the chosen `kinds` with `placeholders[kind]` (see the module docstring)."""

    def __init__(self, kinds: Sequence[str] = KINDS, placeholders: Mapping[str, str] | None = None) -> None:
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown PII kinds {', '.join(unknown)} (known: {', '.join(KINDS)})")
        self.kinds = tuple(kinds)
        self.placeholders = {**PLACEHOLDERS, **(placeholders or {})}
        parts = []
        if "email" in self.kinds:
            parts.append(f"(?P<email>{_EMAIL})")
        if "ip" in self.kinds:
            parts += [f"(?P<ipv4>{_IPV4})", f"(?P<ipv6>{_IPV6})"]
        if "phone" in self.kinds:
            parts.append(f"(?P<e164>{_PHONE_E164})")
        if {"phone", "id_number", "card"} & set(self.kinds):
            parts.append(f"(?P<digits>{_DIGITS})")
        self._pattern = re.compile("|".join(parts)) if parts else None
        self._screen = "|".join(_SCREENS[kind] for kind in KINDS if kind in self.kinds)

    def _kind(self, match: re.Match[str]) -> str | None:
        group, span = match.lastgroup, match.group()
        if group == "email":
            return "email"
        if group == "ipv4":
            before = match.string[max(0, match.start() - 12) : match.start()]
            return "ip" if _global_ip(span) and _VERSION_BEFORE.search(before) is None else None
        if group == "ipv6":
            return "ip" if sum(1 for part in span.split(":") if part) >= 3 and _global_ip(span) else None
        if group == "e164":
            return "phone" if 8 <= sum(c.isdigit() for c in span) <= 15 else None
        kind = _digits_kind(span)
        return kind if kind in self.kinds else None

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with every span found replaced by its placeholder, and the count per kind."""
        counts: dict[str, int] = {}
        if self._pattern is None:
            return text, counts

        def replace(match: re.Match[str]) -> str:
            kind = self._kind(match)
            if kind is None:
                return match.group()
            counts[kind] = counts.get(kind, 0) + 1
            return self.placeholders[kind]

        return self._pattern.sub(replace, text), counts

    def candidates(self, texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Row numbers of the texts that may hold one of the kinds (a superset; nulls never)."""
        if not self._screen:
            return np.zeros(0, dtype=np.int64)
        found = pc.fill_null(pc.match_substring_regex(texts, self._screen), False)
        return np.flatnonzero(found.to_numpy(zero_copy_only=False))


def redact_text(text: str, kinds: Sequence[str] = KINDS) -> str:
    """`text` with the personal data of `kinds` replaced by the default placeholders."""
    return Redactor(tuple(kinds)).redact(text)[0]
