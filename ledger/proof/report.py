"""What verification found: the Report both verifiers return and the Problem it names
(docs/ledger-format.md, section 6)."""

from __future__ import annotations

import msgspec

from ledger import events as ev

EXIT_OK, EXIT_BAD, EXIT_UNREADABLE = 0, 1, 2


class Problem(msgspec.Struct, frozen=True):
    """The first thing wrong: the seq where it is, the kind (`format`, `chain`, `data`,
    `workflow`, `signature`, `head`), a rule code for workflow problems, and a message."""

    seq: int | None
    kind: str
    message: str
    code: str | None = None
    segment: str | None = None
    line: int | None = None


class Report(msgspec.Struct):
    """What verification found. `exit_code`: 0 intact and lawful, 1 tampered or unlawful,
    2 unreadable. `head` is the last good event's hash; `count` how many events were good."""

    path: str
    count: int = 0
    head: str = ev.GENESIS_PREV
    problem: Problem | None = None
    unreadable: str | None = None
    warnings: list[str] = []
    statuses: dict[str, int] = {}
    redactions: list[str] = []
    unchecked_decisions: int = 0  # with rosters and signed_from: the decisions before it, not checked

    @property
    def ok(self) -> bool:
        return self.problem is None and self.unreadable is None

    @property
    def exit_code(self) -> int:
        if self.unreadable is not None:
            return EXIT_UNREADABLE
        return EXIT_OK if self.problem is None else EXIT_BAD


def close_report(report: Report, expect_head: str | None, head_seen_at: int | None, open_requests: list[tuple[int, str]],
                 statuses: dict[str, int]) -> None:
    """The end both verifiers give a report after its last event: the expected head (a problem
    when no line had it, a warning when events follow it), the requests by `statuses`
    (ledger.workflow.count_statuses), and a warning for each ask whose interrupt was never
    recorded, among `open_requests` ((request, status), in the order proposed)."""
    if expect_head is not None:
        if head_seen_at is None:
            report.problem = Problem(None, "head", f"the expected head {expect_head} is not in this ledger: it was truncated or rewritten")
            return
        if head_seen_at != report.count:
            report.warnings.append(f"the expected head is seq {head_seen_at}; {report.count - head_seen_at} events follow it")
    report.statuses = statuses
    for request, status in open_requests:
        if status == "interrupting":
            report.warnings.append(f"request {request} is an ask with no interrupt recorded")
