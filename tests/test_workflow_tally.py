"""ledger.workflow.machine.Tally counts approvals as they come; it must say what Requirements says of the
same approvers: met_by after every approval, and allows for anyone, on requirements of every
shape (named and anyone quorums, names listed twice, no quorum at all)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsl.requirements import Quorum, Requirements
from ledger.workflow.machine import Tally

people = st.sampled_from(["ann", "bob", "cy", "dee", "eve", "fay"])
quorums = st.builds(
    Quorum,
    count=st.integers(1, 4),
    approvers=st.none() | st.lists(people, max_size=5).map(tuple),
    group=st.none(),
)
requirements = st.builds(Requirements, quorums=st.lists(quorums, max_size=4).map(tuple))


@settings(max_examples=500, deadline=None)
@given(requirements=requirements, approvals=st.lists(people, max_size=10), asked=people)
def test_the_tally_agrees_with_the_requirements(requirements, approvals, asked):
    tally = Tally(requirements)
    assert tally.allows(asked) == requirements.allows(asked)
    assert tally.met == requirements.met_by([])
    seen: list[str] = []
    for who in approvals:
        tally.add(who)
        seen.append(who)
        assert tally.met == requirements.met_by(seen), (requirements, seen)
