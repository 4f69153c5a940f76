"""The file ledger passes the Store contract."""

from ledger.log import Ledger
from store_contract import StoreContract


class TestFileStore(StoreContract):
    def open_store(self, where):
        return Ledger(where)
