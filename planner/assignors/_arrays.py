"""Array helpers the assignors share."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def concat_ranges(lengths: np.ndarray) -> NDArray[np.int64]:
    """concatenate([arange(n) for n in lengths]) without a Python loop."""
    starts: NDArray[np.int64] = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) - starts
