"""The classic one-dimensional workloads as numpy matrices (float64)."""

from __future__ import annotations

import numpy as np

from . import _dpmatrix

__all__ = ["all_range", "identity", "prefix"]


def identity(n: int) -> np.ndarray:
    """``I_n``: every cell count."""
    return _dpmatrix.workload_matrix("identity", n)


def prefix(n: int) -> np.ndarray:
    """Prefix sums: row ``i`` counts cells ``0..=i``."""
    return _dpmatrix.workload_matrix("prefix", n)


def all_range(n: int) -> np.ndarray:
    """Every range ``[a, b]``, ``a <= b``, rows in order of ``(a, b)``:
    ``n(n+1)/2`` rows."""
    return _dpmatrix.workload_matrix("all_range", n)
