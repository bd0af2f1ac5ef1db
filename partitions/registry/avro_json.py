"""JSON text as Java's Jackson writes it, which is what Avro's ``Schema.toString()`` and Confluent's
registry answer: compact (no spaces), keys in the order given, non-ASCII characters as they are, control
characters as ``\\b \\t \\n \\f \\r`` or ``\\u00XX`` (upper-case hex), doubles as ``Double.toString``
and floats as ``Float.toString`` (``1.0``, ``1.0E10``, ``1.0E-4``), ``NaN`` and the infinities quoted,
a ``Decimal`` (a JSON schema's exact number) as Java's ``BigDecimal``. Pure.

A float of single precision is the ``Float32`` wrapper, so a caller can say which a number is (Avro
writes a ``float`` default converted by its schema with ``Float.toString``).
"""

from __future__ import annotations

import ctypes
import math
from decimal import Decimal
from typing import Any

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class Float32(float):
    """A float that Jackson writes as a Java ``float`` (its shortest single-precision digits)."""


def string(text: str) -> str:
    out = ['"']
    for char in text:
        escaped = _SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def single_precision(value: float) -> float:
    """``value`` rounded to single precision (as Java's ``(float)`` cast)."""
    return ctypes.c_float(value).value


def _shortest(value: float, single: bool) -> str:
    """Java's digits of a finite non-zero magnitude (``Double.toString`` / ``Float.toString`` since Java
    19, which Java 17 agrees with but for rare values): the fewest significant digits that read back as
    the same value, and when one digit would do, the closest decimal of two digits."""

    def same(text: str) -> bool:
        return (single_precision(float(text)) if single else float(text)) == value

    for digits in range(1, 18):
        text = f"{value:.{digits - 1}e}"
        if same(text):
            if digits == 1:
                text = f"{value:.1e}"
            return text
    return repr(value)


def float32_value(value: float) -> float:
    """The shortest decimal that reads back as the same single-precision float, as a Python float
    (0.1 for the float nearest 0.1, which a double holds as 0.10000000149011612)."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return value
    return float(_shortest(single_precision(value), single=True))


def _java_digits(shortest: str) -> tuple[str, int]:
    """The digits and decimal exponent of a shortest repr: '1.25e-05' -> ('125', -5)."""
    mantissa, _, exponent = shortest.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return "0", 0
    # position of the decimal point relative to the first significant digit
    point = len(whole.lstrip("0")) if whole.strip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    return digits.rstrip("0") or "0", point - 1 + (int(exponent) if exponent else 0)


def java_double(value: float, single: bool = False) -> str:
    """``Double.toString`` (or ``Float.toString`` with ``single``) of a finite or special value."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(single_precision(value) if single else value)
    digits, exponent = _java_digits(_shortest(magnitude, single))
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def dumps(value: Any) -> str:
    """A JSON value (dict, list, str, int, float, Decimal, bool, None) as Jackson writes its tree."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return string(value)
    if isinstance(value, Decimal):
        return str(abs(value) if value.is_zero() else value)  # Java's BigDecimal: no negative zero
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = java_double(value, single=isinstance(value, Float32))
        return string(text) if not math.isfinite(value) else text
    if isinstance(value, dict):
        return "{" + ",".join(f"{string(key)}:{dumps(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {value!r}")
