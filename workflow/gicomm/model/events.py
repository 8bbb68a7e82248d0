"""Binary min-heap event queue over numpy arrays (numba).

An event is (time ns, sequence, kind, id). Ties in time are broken by the sequence number, so the
simulation is deterministic and events scheduled earlier run first. The heap is five parallel
arrays plus a two-element state array ``st = [size, next_sequence]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# event kinds
EV_P_START = 1  # a producer tries to start a batch
EV_P_BUILT = 2  # a producer finished building its WQEs/descriptors; takes the queue lock
EV_P_RUNG = 3  # doorbell/enqueue done: the batch is visible to the queue's server
EV_NIC_DONE = 4  # a NIC processing unit finished its current work item
EV_MSG_DONE = 5  # completions of a run of messages (id = first * 64 + count) became visible
EV_W_DONE = 6  # a proxy worker finished posting a chain
EV_W_POLL = 7  # a proxy worker looks for work
EV_W_CQE = 8  # a run's CQE reached a per-pass proxy worker's queue (id = run id * workers + worker)


def new_heap(capacity: int) -> tuple[np.ndarray, ...]:
    """Heap arrays (times, seqs, kinds, ids, st) with room for ``capacity`` events."""
    cap = max(int(capacity), 16)
    return (
        np.zeros(cap, dtype=np.float64),
        np.zeros(cap, dtype=np.int64),
        np.zeros(cap, dtype=np.int32),
        np.zeros(cap, dtype=np.int64),
        np.zeros(2, dtype=np.int64),
    )


@njit(cache=True, inline="always")
def _less(ht: np.ndarray, hs: np.ndarray, a: int, b: int) -> bool:
    return ht[a] < ht[b] or (ht[a] == ht[b] and hs[a] < hs[b])


@njit(cache=True, inline="always")
def _swap(ht: np.ndarray, hs: np.ndarray, hk: np.ndarray, hi: np.ndarray, a: int, b: int) -> None:
    ht[a], ht[b] = ht[b], ht[a]
    hs[a], hs[b] = hs[b], hs[a]
    hk[a], hk[b] = hk[b], hk[a]
    hi[a], hi[b] = hi[b], hi[a]


@njit(cache=True)
def heap_push(
    ht: np.ndarray,
    hs: np.ndarray,
    hk: np.ndarray,
    hi: np.ndarray,
    st: np.ndarray,
    t: float,
    kind: int,
    ident: int,
) -> None:
    """Schedule event ``kind`` for ``ident`` at time ``t``. Raises when the heap is full."""
    n = st[0]
    if n >= ht.shape[0]:
        raise RuntimeError("event heap full")
    ht[n] = t
    hs[n] = st[1]
    hk[n] = kind
    hi[n] = ident
    st[0] = n + 1
    st[1] += 1
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if _less(ht, hs, i, parent):
            _swap(ht, hs, hk, hi, i, parent)
            i = parent
        else:
            break


@njit(cache=True)
def heap_pop(
    ht: np.ndarray, hs: np.ndarray, hk: np.ndarray, hi: np.ndarray, st: np.ndarray
) -> tuple[float, int, int]:
    """Remove and return the earliest event as (time, kind, id). The heap must not be empty."""
    t = ht[0]
    kind = hk[0]
    ident = hi[0]
    n = st[0] - 1
    st[0] = n
    if n > 0:
        ht[0] = ht[n]
        hs[0] = hs[n]
        hk[0] = hk[n]
        hi[0] = hi[n]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= n:
                break
            small = left
            right = left + 1
            if right < n and _less(ht, hs, right, left):
                small = right
            if _less(ht, hs, small, i):
                _swap(ht, hs, hk, hi, small, i)
                i = small
            else:
                break
    return t, kind, ident
