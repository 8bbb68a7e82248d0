"""NIC connection-context cache: set-associative, least-recently-used replacement (numba).

The cache is two flat arrays of ``sets * ways`` entries: ``tags`` (connection id, -1 when empty)
and ``stamps`` (the access counter at the last use). A set is chosen by a multiplicative hash of
the connection id, so neighbouring ids spread over all sets.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def new_cache(sets: int, ways: int) -> tuple[np.ndarray, np.ndarray]:
    """Empty cache arrays (tags, stamps) for ``sets`` x ``ways`` entries (at least one entry)."""
    n = max(int(sets), 1) * max(int(ways), 1)
    return np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)


@njit(cache=True, inline="always")
def cache_access(
    tags: np.ndarray, stamps: np.ndarray, sets: int, ways: int, conn: int, clock: int
) -> bool:
    """Touch ``conn``; return True on a hit. On a miss the LRU way of its set is replaced.

    ``sets <= 0`` disables the cache (every access hits).
    """
    if sets <= 0:
        return True
    h = (conn * 2654435761) & 0xFFFFFFFF  # Knuth multiplicative hash, then its high bits
    base = ((h * sets) >> 32) * ways
    victim = base
    oldest = stamps[base]
    for k in range(base, base + ways):
        if tags[k] == conn:
            stamps[k] = clock
            return True
        if tags[k] == -1:
            # an empty way is always the best victim
            if oldest >= 0:
                victim = k
                oldest = -1
        elif oldest >= 0 and stamps[k] < oldest:
            victim = k
            oldest = stamps[k]
    tags[victim] = conn
    stamps[victim] = clock
    return False
