"""The commands' argument types: each refuses a value that is not one with argparse's own line (`dlbench X: error:
argument --n: ...`, exit 2), before the command does any work. Standard library only (dlbench heavy runs on
any python3)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


def count(minimum: int, what: str = "a whole number") -> Callable[[str], int]:
    """A whole number at least `minimum` (a count of threads, replications, workers, iterations)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}; give one of {minimum} or more") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is below {minimum}; give {what} of {minimum} or more")
        return value

    parse.__name__ = "count"  # argparse names a type in its messages
    return parse


def positive(text: str) -> float:
    """A finite number above 0 (a time limit, an interval, a scale)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give one above 0") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number above 0; give one")
    return value


def at_least_zero(text: str) -> float:
    """A finite number of 0 or more (a limit where 0 means none)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give one of 0 or more") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of 0 or more; give one")
    return value


def not_a_folder(text: str) -> str:
    """A file the command writes, its folder made if absent: anything but an existing folder."""
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name the file to write")
    return text
