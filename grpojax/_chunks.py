"""Fixed-size chunks of a batch, the last one padded, so that one compiled program serves every chunk."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["padded_chunks"]


def padded_chunks(n: int, size: int) -> Iterator[tuple[np.ndarray, int]]:
    """Yield ``(index, m)`` over ``range(n)`` in chunks: ``index`` has exactly ``size`` entries (the last
    chunk repeats its final row to fill up), of which the first ``m`` are the chunk's own rows."""
    for lo in range(0, n, size):
        yield np.minimum(np.arange(lo, lo + size), n - 1), min(size, n - lo)
