"""The file ledger passes the Store contract, with segments of every size (one event each, and
the default)."""

import random

import pytest

from ledger.store.log import Ledger
from store_contract import StoreContract, proposal


class TestFileStore(StoreContract):
    def open_store(self, where):
        return Ledger(where)


class TestFileStoreSmallSegments(StoreContract):
    def open_store(self, where):
        return Ledger(where, segment_bytes=1500)


@pytest.mark.parametrize("segment_bytes", [1, 3000, 200_000])
def test_every_event_is_found_by_its_seq(tmp_path, segment_bytes):
    rng = random.Random(segment_bytes)
    with Ledger(tmp_path / "l", segment_bytes=segment_bytes) as ledger:
        for i in range(150):
            ledger.append_batch([proposal(i)] * rng.randint(1, 4))
        whole = list(ledger.records())
        for record in whole:
            assert ledger.record_at(record.seq).hash == record.hash
        assert ledger.locate(0) is None and ledger.locate(len(whole) + 1) is None


def test_a_hint_that_no_longer_holds_the_seq_is_not_trusted(tmp_path):
    with Ledger(tmp_path / "l") as ledger:
        ledger.append_batch([proposal(i) for i in range(10)])
        place = ledger.locate(5)
        assert ledger.record_at(7, place).seq == 7  # the line at the hint is seq 5: found by search
