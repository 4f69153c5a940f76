"""The abstract test case every Store passes (ledger.store). A store's test module subclasses
StoreContract and gives `open_store(where)`: a new writer on the ledger at `where` (created on
first use), so that two writers of one ledger can be opened side by side."""

from __future__ import annotations

import threading

import pytest

from ledger import events as ev
from ledger.store.base import HeadMoved, Store


def proposal(n: int) -> tuple[ev.Event, dict]:
    event = ev.Proposed(ts="", run=None, proposer="agent", call_id=None, tool="read_thing", args_digest="a" * 64,
                        context_digest="b" * 64, policy="p", policy_digest="c" * 64, effect="allow", rules=(), reasons=())
    return event, {"args": {"n": n}, "context": {}}


class StoreContract:
    def open_store(self, where) -> Store:
        raise NotImplementedError

    @pytest.fixture
    def where(self, tmp_path):
        return tmp_path / "ledger"

    def test_a_new_ledger_starts_with_its_genesis(self, where):
        store = self.open_store(where)
        [genesis] = list(store.records())
        assert isinstance(genesis.event, ev.Genesis) and store.head == (1, genesis.hash)
        store.close()

    def test_a_transaction_appends_gapless_chained_events_and_sees_what_others_appended(self, where):
        one, two = self.open_store(where), self.open_store(where)
        appended = one.transact(lambda new: [proposal(1), proposal(2)])
        assert [r.seq for r in appended] == [2, 3] and appended[1].event.prev == appended[0].hash
        seen = []
        two.transact(lambda new: seen.extend(new) or [proposal(3)])
        assert [r.seq for r in seen] == [2, 3] and [r.hash for r in seen] == [r.hash for r in appended]
        assert [r.seq for r in one.records(3)] == [3, 4]
        one.close(), two.close()

    def test_a_failed_build_appends_nothing(self, where):
        store = self.open_store(where)
        head = store.head

        def build(new):
            raise RuntimeError("refused")

        with pytest.raises(RuntimeError):
            store.transact(build)
        assert store.head == head and len(list(store.records())) == 1
        assert store.transact(lambda new: []) == [] and store.head == head
        store.close()

    def test_append_at_an_expected_head_refuses_a_moved_one(self, where):
        one, two = self.open_store(where), self.open_store(where)
        expected = two.head
        one.transact(lambda new: [proposal(1)])
        with pytest.raises(HeadMoved) as caught:
            two.append_at([proposal(2)], expected)
        assert caught.value.head[0] == 2 and len(list(two.records())) == 2
        [record] = two.append_at([proposal(2)], two.head)
        assert record.seq == 3
        one.close(), two.close()

    def test_growth_is_noticed_without_the_lock(self, where):
        one, two = self.open_store(where), self.open_store(where)
        assert not two.grew()
        one.transact(lambda new: [proposal(1)])
        assert two.grew()
        two.transact(lambda new: [])
        assert not two.grew()
        one.close(), two.close()

    def test_concurrent_writers_keep_the_chain_gapless(self, where):
        stores = [self.open_store(where) for _ in range(3)]

        def work(store, base):
            for i in range(20):
                store.transact(lambda new, i=i: [proposal(base + i)])

        threads = [threading.Thread(target=work, args=(s, 100 * k)) for k, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        records = list(stores[0].records())
        assert [r.seq for r in records] == list(range(1, 62))
        assert all(b.event.prev == a.hash for a, b in zip(records, records[1:]))
        for s in stores:
            s.close()

    def test_reading_from_a_seq_and_one_event_by_its_seq(self, where):
        store = self.open_store(where)
        for i in range(1, 40):
            store.transact(lambda new, i=i: [proposal(i)] * (1 + i % 3))
        head = store.head[0]
        whole = list(store.records())
        assert [r.seq for r in whole] == list(range(1, head + 1))
        for seq in (1, 2, head // 2, head - 1, head):
            assert [r.hash for r in store.records(seq)] == [r.hash for r in whole[seq - 1:]]
            assert store.record_at(seq).hash == whole[seq - 1].hash
            assert store.record_at(seq, store.locate(seq)).hash == whole[seq - 1].hash
        assert list(store.records(head + 1)) == []
        assert [r.seq for r in store.records(1, kind="genesis")] == [1]
        assert [r.seq for r in store.records(5, kind="proposed")] == list(range(5, head + 1))
        assert store.ledger_id == whole[0].event.ledger_id
        store.close()
