"""Flag types of the command line: values checked and converted where they enter.

``argparse`` calls a flag's ``type`` on the text the user gave; the callables here parse it and check it
at once, so a bad value ends with one line naming the flag (``grpojax predict: error: argument --eta:
must be > 0 (the learning rate), got -1``) before anything is computed. Each check is stated once:

- :class:`Real` -- a finite number in a range. The computations of the command line run in float32, so
  a value float32 cannot hold is refused with a message saying so: beyond ±3.4e38, or nonzero but
  below float32's smallest normal number (1.2e-38), or one that float32 rounds onto an excluded end of
  its range (``--mu 0.9999999999`` is 1.0 in float32).
- :class:`Int` -- an integer in a range (sizes, seeds and counts have an upper end, so 2^63 is refused
  here instead of overflowing later).
- :func:`out_path` -- a non-empty path (an empty ``--out`` would write into the working folder).

The ranges are written at the flag, in the words of its help.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)
INT32_MAX = 2**31 - 1


def _number(text: str) -> float:
    s = text.strip()
    try:
        value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not s.isascii():  # float() reads '１' (a fullwidth digit) as 1; a typo in a flag should not pass
        raise argparse.ArgumentTypeError(f"expected a number written with ASCII digits, got {text!r}")
    return value


class Real:
    """A finite real number in ``[lo, hi]`` (ends excluded with ``lo_open`` / ``hi_open``) that float32 holds.

    Args:
        lo, hi: the range (None: unbounded on that side).
        lo_open, hi_open: exclude that end.
        what: the meaning, shown in the message (e.g. "the learning rate").
        float32: also require the value to be representable in float32 (the computation's precision).
    """

    def __init__(self, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                 hi_open: bool = False, what: str = "", float32: bool = True):
        self.lo, self.hi, self.lo_open, self.hi_open, self.what, self.float32 = lo, hi, lo_open, hi_open, what, float32
        self.__name__ = "number"  # argparse names the type in "invalid <name> value"

    def expected(self) -> str:
        what = f" ({self.what})" if self.what else ""
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            return f"in {'(' if self.lo_open else '['}{lo:g}, {hi:g}{')' if self.hi_open else ']'}{what}"
        if lo is not None:
            return f"{'>' if self.lo_open else '>='} {lo:g}{what}"
        if hi is not None:
            return f"{'<' if self.hi_open else '<='} {hi:g}{what}"
        return f"a finite number{what}"

    def _inside(self, x: float) -> bool:
        if self.lo is not None and (x < self.lo or (self.lo_open and x == self.lo)):
            return False
        if self.hi is not None and (x > self.hi or (self.hi_open and x == self.hi)):
            return False
        return True

    def __call__(self, text: str) -> float:
        x = _number(text)
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"must be a finite number{' ' + self.expected() if self.lo is not None or self.hi is not None else ''}, got {text}")
        if not self._inside(x):
            raise argparse.ArgumentTypeError(f"must be {self.expected()}, got {text}")
        if self.float32:
            if abs(x) > F32_MAX:
                raise argparse.ArgumentTypeError(
                    f"{text} is beyond the float32 range (±{F32_MAX:.3g}) the computation uses; expected {self.expected()}")
            if x != 0 and abs(x) < F32_TINY:
                raise argparse.ArgumentTypeError(
                    f"{text} is below the smallest float32 number ({F32_TINY:.2g}) the computation uses: it "
                    f"would be 0; expected {self.expected()}")
            x32 = float(np.float32(x))
            if not self._inside(x32):
                raise argparse.ArgumentTypeError(
                    f"{text} is {x32:.9g} in float32 (the precision of the computation); expected {self.expected()}")
        return x


class Int:
    """An integer in ``[lo, hi]`` (``hi`` defaults to 2^31 − 1), written in ASCII digits."""

    def __init__(self, lo: int | None = None, hi: int | None = INT32_MAX, *, what: str = ""):
        self.lo, self.hi, self.what = lo, hi, what
        self.__name__ = "integer"

    def expected(self) -> str:
        what = f" ({self.what})" if self.what else ""
        if self.lo is not None and self.hi is not None:
            return f"an integer in [{self.lo}, {self.hi:,}]{what}"
        if self.lo is not None:
            return f"an integer >= {self.lo}{what}"
        return f"an integer <= {self.hi:,}{what}"

    def __call__(self, text: str) -> int:
        s = text.strip()
        if not s.isascii() or not s.lstrip("+-").isdigit():
            raise argparse.ArgumentTypeError(f"must be {self.expected()}, got {text!r}")
        x = int(s)
        if (self.lo is not None and x < self.lo) or (self.hi is not None and x > self.hi):
            raise argparse.ArgumentTypeError(f"must be {self.expected()}, got {text}")
        return x


def out_path(text: str) -> str:
    """A non-empty output path (an empty one would write into the working folder without a word)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a path (got an empty one); use . for the working folder")
    return text


out_path.__name__ = "path"


def in_path(text: str) -> str:
    """A non-empty input path (an empty one would read the working folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a file or folder (got an empty path)")
    return text


in_path.__name__ = "path"

SEED = Int(0, 2**32 - 1, what="PRNG seed")
