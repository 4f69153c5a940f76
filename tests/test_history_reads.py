"""`Policy.reads_history` sees history read under arithmetic, a unary minus and a projection.

The Gate decides a policy that does not read history without it (ledger/workflow/gate.py): a rule
whose history read it missed would see an empty run and could let a call through that its rule
asks for (fail open).
"""

from __future__ import annotations

import pytest

from dsl import Policy
from ledger.workflow.gate import Gate

CONDITIONS = [
    'sum(run[*].args.amount) > 5',
    'count(calls("pay")) + 0 >= 1',
    '-count(calls("pay")) < 0',
    'count(calls("pay")) * 2 >= 2',
]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_a_history_read_inside_arithmetic_or_a_projection_counts(condition):
    policy = Policy.from_text(f'default deny "no"\nask pay when {condition}\nallow pay\n', "p.policy")
    assert policy.reads_history
    assert policy.rules[0].reads_history


def test_the_gate_asks_for_a_payment_after_a_total_read_by_a_projection(tmp_path):
    policy = Policy.from_text('default deny "no"\nask pay when sum(run[*].args.amount) > 5\nallow pay\n', "p.policy")
    with Gate(policy, tmp_path / "l") as gate:
        assert gate.propose("pay", {"amount": 10}, proposer="ag", run="r1").effect == "allow"
        assert gate.propose("pay", {"amount": 1}, proposer="ag", run="r1").effect == "ask"  # 10 paid before
        assert gate.propose("pay", {"amount": 1}, proposer="ag", run="r2").effect == "allow"
