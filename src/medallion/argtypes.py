"""Argument types of the CLI's numeric flags: a bad value is exit 2 with a message, before any
Spark starts, never a Spark error later."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from datetime import datetime, timezone


def bounded(
    kind: type[int] | type[float],
    low: float,
    *,
    above: bool = False,
    high: float | None = None,
    unit: str = "",
) -> Callable[[str], int | float]:
    """A converter to ``kind`` that refuses values below ``low`` (at or below it with
    ``above``) or above ``high``.

    >>> bounded(int, 1)("3"), bounded(float, 0, above=True, unit="seconds")("0.5")
    (3, 0.5)
    """
    suffix = f" {unit}" if unit else ""
    if high is not None:
        rule = f"must be from {low:g} to {high:g}{suffix}"
    elif above:
        rule = f"must be more than {low:g}{suffix}"
    else:
        rule = "must be zero or more" if low == 0 else f"must be {low:g} or more{suffix}"
    noun = "a whole number" if kind is int else "a number"

    def convert(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"use {noun}{' of ' + unit if unit else ''}") from None
        finite = not isinstance(value, float) or math.isfinite(value)
        if (
            not finite
            or value < low
            or (above and value == low)
            or (high is not None and value > high)
        ):
            raise argparse.ArgumentTypeError(rule)
        return value

    return convert


def starting_version(text: str) -> int | str:
    """A table version (0 or more) or ``latest``.

    >>> starting_version("3"), starting_version("latest")
    (3, 'latest')
    """
    if text == "latest":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("use a table version (0 or more) or latest") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def byte_size(text: str) -> str:
    """A positive size as Spark's byte strings take it: a number, optionally followed by b,
    k(b), m(b), g(b), t(b) or p(b).

    >>> byte_size("512m")
    '512m'
    """
    size = re.fullmatch(r"([0-9]+)([kmgtp]b?|b)?", text, re.IGNORECASE)
    if size is None or int(size.group(1)) == 0:
        raise argparse.ArgumentTypeError("use a positive size such as 1048576, 512m or 1g")
    return text


def point_in_time(text: str) -> datetime:
    """An ISO-8601 date or date and time, as UTC (a zone offset is converted, none is UTC).

    >>> point_in_time("2026-11-28"), point_in_time("2026-11-28T10:30:00+01:00")
    (datetime.datetime(2026, 11, 28, 0, 0), datetime.datetime(2026, 11, 28, 9, 30))
    >>> point_in_time("2026-11-28T09:30:00Z")
    datetime.datetime(2026, 11, 28, 9, 30)
    """
    # Python 3.10's fromisoformat takes no "Z" (3.11's does): it is +00:00.
    if text[-1:] in ("Z", "z"):
        text = f"{text[:-1]}+00:00"
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "use an ISO-8601 date or time, such as 2026-11-28 or 2026-11-28T09:30:00Z"
        ) from None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


COUNT = bounded(int, 0)  # zero or more
AT_LEAST_ONE = bounded(int, 1)
SHARE = bounded(float, 0, high=1)  # a rate from 0 to 1
POSITIVE_SECONDS = bounded(float, 0, above=True, unit="seconds")
POSITIVE_MINUTES = bounded(float, 0, above=True, unit="minutes")
HOURS = bounded(float, 0, unit="hours")
PORT = bounded(int, 1, high=65535)
