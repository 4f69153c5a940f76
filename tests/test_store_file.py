"""The file ledger passes the Store contract."""

from ledger.store.log import Ledger
from store_contract import StoreContract


class TestFileStore(StoreContract):
    def open_store(self, where):
        return Ledger(where)
