"""The storage interface the Gate and the verifiers need, so that nothing above it assumes files.

A Store holds one hash-chained ledger (docs/ledger-format.md): events with gapless seqs, each
linked to the one before by `prev`. The file ledger (ledger.store.log.Ledger) is the first Store; a
database one will be the second. Every Store passes the abstract test case in
tests/store_contract.py. What a Store must do:

- `head`: `(seq, hash)` of the last event, as of this Store's last commit or catch-up.
- `transact(build, since=None)`: hold the ledger's commit lock for one commit; catch up with
  what other writers appended; call `build(new)` with the Records after seq `since` (an
  iterable, read as it is folded); append what it returns in one durable write at the head it
  caught up to; release. The Gate's every step is one transaction.
- `append_at(items, expected)`: append a batch only if the head is still `expected` (else
  HeadMoved, nothing appended): optimistic writers that do not fold.
- `records(from_seq, kind=None)`: the stored events from a seq (optionally of one kind), in
  order, without taking the lock; reading from a seq costs what is read, not the ledger before it.
- `record_at(seq, hint=None)`: one stored event (`hint` is an opaque place a Store may return as
  `locate(seq)`, to skip the search).
- `ledger_id`: the genesis event's identity of the ledger; `format` the format it names (None
  when a Store does not say: the Workflow then learns it from the genesis, if it folds it).
- `cache_dir()`: a local directory for data derived from the ledger (a Gate's snapshot), or None.
- `grew()`: whether other writers may have appended since this Store last looked, cheaply and
  without the lock; `wait_for_growth(timeout)` blocks until it is true (what `Gate.wait` uses:
  a Store with a notification mechanism sleeps in it; the default polls `grew()`).
- `close()`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

Items = Sequence[tuple[Any, "dict | bytes | None"]]


class HeadMoved(Exception):
    """`append_at` found another head than the one expected: someone appended first. Nothing
    was appended. `head` is the head found."""

    def __init__(self, expected: tuple[int, str], head: tuple[int, str]):
        super().__init__(f"the ledger's head is seq {head[0]}, not the expected seq {expected[0]}: another writer appended first")
        self.expected, self.head = expected, head


class Store(ABC):
    """A hash-chained ledger's storage (module docstring)."""

    @property
    @abstractmethod
    def head(self) -> tuple[int, str]: ...

    @abstractmethod
    def transact(self, build: Callable[[Iterator], Items], *, since: int | None = None) -> list: ...

    @abstractmethod
    def records(self, from_seq: int = 1, *, kind: str | None = None) -> Iterator: ...

    @abstractmethod
    def record_at(self, seq: int, hint: Any = None) -> Any: ...

    @abstractmethod
    def locate(self, seq: int) -> Any: ...

    @property
    @abstractmethod
    def ledger_id(self) -> str: ...

    @property
    def format(self) -> "str | None":
        return None

    def cache_dir(self) -> "Path | None":
        return None

    def wait_for_growth(self, timeout: float, since: int | None = None) -> bool:
        """Poll until `grew()`, or the head is past seq `since` (True), or `timeout` seconds
        pass (False)."""
        from ledger.store.watch import _polled

        def grown() -> bool:
            return (since is not None and self.head[0] > since) or self.grew()

        return True if grown() else _polled(grown, time.monotonic() + max(0.0, timeout))

    @abstractmethod
    def grew(self) -> bool: ...

    @abstractmethod
    def close(self) -> None: ...

    def append_at(self, items: Items, expected: tuple[int, str]) -> list:
        """Append `items` in one commit if the head is `expected` after catching up; else raise
        HeadMoved and append nothing."""

        def build(_new: list) -> Items:
            if self.head != expected:
                raise HeadMoved(expected, self.head)
            return items

        return self.transact(build)
