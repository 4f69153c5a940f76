"""Waiting until a file ledger grows, without busy polling.

`wait_for_growth(directory, grew, timeout)` returns as soon as `grew()` (a cheap check: two stats,
ledger.store.log.Ledger.grew) says the ledger may hold new events, or False after `timeout`
seconds. It sleeps in the kernel's file-change notification, through the watchfiles library
(inotify on Linux, FSEvents on macOS, kqueue on the BSDs): a write to a segment wakes it within a
few milliseconds. Where that is not to be had (the library is missing, the system refuses one
more watch, COUNTERSIGN_WAIT=poll (the default is notify), or a file system that sends no notifications, such as NFS:
set the variable there), it polls `grew()` instead, every 20 ms at first and backing off to every
250 ms. Even with notifications it looks every WAKE_SECONDS, so that a change made between its
first look and the start of the watch is never waited on for long.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Callable

POLL_SECONDS = (0.02, 0.25)  # the polling fallback: first interval, longest interval
WAKE_SECONDS = 0.25  # with notifications: the longest sleep between two looks


def wait_for_growth(directory: Path, grew: Callable[[], bool], timeout: float) -> bool:
    """True once `grew()` is true (at once if it already is), False when `timeout` seconds pass
    first. Never raises for a notification failure: it falls back to polling."""
    if grew():
        return True
    end = time.monotonic() + max(0.0, timeout)
    how = os.environ.get("COUNTERSIGN_WAIT", "notify")
    if how not in ("notify", "poll"):
        warnings.warn(f"COUNTERSIGN_WAIT={how!r} is neither 'notify' nor 'poll': notifications are used", stacklevel=2)
    if how != "poll":
        try:
            return _notified(directory, grew, end)
        except Exception:  # noqa: BLE001 (no notification here: an ImportError, an OS limit, ...)
            pass
    return _polled(grew, end)


def _notified(directory: Path, grew: Callable[[], bool], end: float) -> bool:
    from watchfiles import watch  # imported on first wait: about 50 ms, which most processes never pay

    left = end - time.monotonic()
    if left <= 0:
        return grew()
    slice_ms = max(1, int(min(WAKE_SECONDS, left) * 1000))
    # raise_interrupt: Ctrl-C raises KeyboardInterrupt here, as it would in a sleep (watchfiles
    # would otherwise log it and end the watch, and a waiter would report "still waiting").
    for _changes in watch(directory, watch_filter=None, recursive=False, debounce=1, step=1,
                          rust_timeout=slice_ms, yield_on_timeout=True, raise_interrupt=True):
        if grew():
            return True
        if time.monotonic() >= end:
            return False
    return grew()


def _polled(grew: Callable[[], bool], end: float) -> bool:
    delay = POLL_SECONDS[0]
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return grew()
        time.sleep(min(delay, left))
        if grew():
            return True
        delay = min(delay * 2, POLL_SECONDS[1])
