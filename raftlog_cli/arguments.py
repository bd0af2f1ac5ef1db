"""The argument types the cluster commands share: each refuses a bad value with a message naming it."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


def config_pair(pair: str) -> tuple[str, str]:
    """``KEY=VALUE`` (a topic config)."""
    key, sep, value = pair.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{pair!r}: use KEY=VALUE")
    return key, value


def header_pair(text: str) -> tuple[str, str | None]:
    """``NAME=VALUE`` (UTF-8), or ``NAME`` alone for a header with a null value."""
    name, equals, value = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: a header is NAME=VALUE, or NAME for a null value")
    return name, value if equals else None


_DURATION_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text: str) -> int:
    """A duration as a number and a unit (``90s``, ``30m``, ``12h``, ``30d``), in ms."""
    number, unit = text[:-1], text[-1:]
    if unit not in _DURATION_UNITS_MS or not number.isdigit() or int(number) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is a number >= 1 and s, m, h or d (e.g. 30d)")
    return int(number) * _DURATION_UNITS_MS[unit]
