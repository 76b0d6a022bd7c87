"""glibc's heap before the sequential trial loop: the mechanism's freed temporaries kept.

glibc's ``malloc`` serves a request below its *mmap threshold* from the heap and gives the
free memory at the heap's top back to the system once it exceeds the *trim threshold*. Both
start at 128 KiB and are dynamic: freeing an mmap'd block larger than the threshold (and at
most 32 MiB on 64-bit systems) raises the mmap threshold to its size and the trim threshold to
twice that (mallopt(3), "M_MMAP_THRESHOLD"). A mechanism whose temporaries add up to more than
twice the largest block the process has freed so far (a count sketch over 10⁶ records: about
six 4 MiB arrays per call, while the engine frees nothing larger) has them given back after
every call and faulted in again, page by page, on the next one: 250,000 minor page faults and
0.5-0.8 s of system time over 128 trials, against 45,000 for the same calls in a plain loop
(docs/guide/sizes.md).

:func:`raise_heap_thresholds` frees one block of just under 32 MiB before the loop, so glibc
itself raises its thresholds to their dynamic maximum (32 MiB; trim 64 MiB) -- what any
program that frees such an array triggers. Nothing is set with ``mallopt``: any ``mallopt``
of these parameters turns the dynamic thresholds off for the rest of the process, which no
call can undo. The cost is bounded: the process may keep up to 64 MiB of freed memory at the
heap's top for reuse instead of giving it back at once. Results never depend on it (it only
decides where ``malloc`` finds memory). Only on glibc, in the process that runs the trials.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["raise_heap_thresholds"]

#: Bytes of the freed block: an mmap'd chunk of at most DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on
#: 64-bit glibc; the chunk adds a header and rounds up to a page, hence 64 KiB below it).
PRIMING_BYTES = 32 * 2**20 - 64 * 2**10

_done = False


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # not glibc, or not POSIX
        return False


def raise_heap_thresholds() -> bool:
    """Raise glibc's dynamic mmap and trim thresholds to their maximum, once per process, by
    freeing one block of :data:`PRIMING_BYTES` (see the module docstring); returns whether it
    did it now. Nothing happens on other C libraries. The block is never touched, so it costs
    one ``mmap`` and one ``munmap`` and no page.
    """
    global _done
    if _done or not _glibc():
        return False
    block = np.empty(PRIMING_BYTES, dtype=np.uint8)
    del block
    _done = True
    return True
