"""Storage, the bottom layer: the hash-chained ledger's bytes and nothing that reads them as a
workflow. `base` is the Store interface every store implements (tests/store_contract.py is its
abstract test case); `log` is the file store (a directory of JSON Lines segments,
docs/ledger-format.md); `lines` and `scan` are the line layout and its bounded reader; `native` the
compiled module's sealer. Nothing here imports the layers above (proof, workflow, analytics)."""

from ledger.store.base import HeadMoved, Store
from ledger.store.log import Ledger, LedgerReader, Record

__all__ = ["HeadMoved", "Ledger", "LedgerReader", "Record", "Store"]
