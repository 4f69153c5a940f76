"""The data beside a ledger line's body, checked against the digests the chain holds: check 6 of
ledger.proof.verify, shared by `ledger verify` and the columnar projection
(ledger.analytics.projection), so that both accept and refuse the same lines.

Present exactly for proposed and edited events (their arguments, and a proposal's context), an
executed event that keeps its result, and a `policy` event that pins its policy's text
(ledger.pinning); the values' structural digests (ledger.digest) equal those in the body, markers
counting as the values they replaced only at the paths `redacted` events name; spelled
canonically (docs/ledger-format.md, sections 2 and 5 and "Redaction")."""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ledger import events as ev, pinning
from ledger.digest import MAX_NESTING, REDACTED, ArgumentsError, canonical_spelling, is_marker, redacted_digest, value_digest
from ledger.fieldpath import format_field_path, resolve
from ledger.proof.report import Problem


def check_result(record, problem) -> Problem | None:
    """An `executed` line's kept result (section 5): `{"result": R}`, R's digest the body's
    `result_digest`, canonically spelled."""
    event = record.event
    if event.result_digest is None:
        return problem("data", "an executed event without a result digest carries no data (its data must be null)")
    try:
        data = msgspec.json.decode(record.data)
    except msgspec.DecodeError as exc:
        return problem("data", f"the data beside the body is not JSON: {exc}")
    if not isinstance(data, dict) or set(data) != {"result"}:
        return problem("data", "the data of an executed event must hold exactly ['result']")
    try:
        if value_digest(data["result"]) != event.result_digest:
            return problem("data", "the kept result does not match its digest in the chain")
    except ArgumentsError as exc:
        return problem("data", f"the stored data is not a JSON value: {exc}")
    if canonical_spelling(data) != record.data:
        return problem("data", "the stored data is not in its canonical spelling: it was changed after it was written")
    return None


def check_data(record, problem: Callable[[str, str], Problem], redactions: dict[tuple, str] | None,
               found: Any = None) -> Problem | None:
    """Check 6 of ledger.proof.verify for one line: the data beside the body (docs/ledger-format.md,
    sections 2, 5, 11.5 and "Redaction"). `record` has `.event` (the decoded body), `.data` (the
    data bytes as stored, `b"null"` for none) and `.seq`; `problem(kind, message)` makes the
    Problem to return. `redactions` maps each field path (a tuple of keys and indexes) redacted
    in this line's data to the digest of the value removed (a marker counts as that value only
    there); `found` (ledger.proof.verify.Redactions, needed when `redactions` is given) gets in
    its `findings` what is wrong with an announced path, which the `redacted` event is blamed
    for. Returns the first Problem, or None; never raises for bad data (data nested deeper than
    msgspec reads is a Problem)."""
    try:
        return _check(record, problem, redactions, found)
    except RecursionError:  # msgspec and the digest give up on the same depths; a writer never nests that deep
        return problem("data", f"the data beside the body nests too deeply to read (a writer allows {MAX_NESTING} levels)")


def _check(record, problem, redactions: dict[tuple, str] | None, found: Any) -> Problem | None:
    event = record.event
    if isinstance(event, ev.Executed) and record.data != b"null":
        return check_result(record, problem)
    if isinstance(event, ev.PolicyLoaded) and event.files is not msgspec.UNSET:
        # a pinned policy's text and groups, held by the files' and the policy's digests (section 11.5)
        message = pinning.data_problem(event, record.data)
        return None if message is None else problem("data", message)
    if not isinstance(event, ev.WITH_DATA):
        if record.data != b"null":  # exactly: section 2 allows no whitespace around it either
            kind = event.__struct_config__.tag
            return problem("data", f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} event carries no data (its data must be null)")
        return None
    try:
        data = msgspec.json.decode(record.data)
    except msgspec.DecodeError as exc:
        return problem("data", f"the data beside the body is not JSON: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("args"), dict):
        return problem("data", "the data beside the body has no arguments object")
    expected_keys = {"args", "context"} if isinstance(event, ev.Proposed) else {"args"}
    if set(data) != expected_keys:
        return problem("data", f"the data must hold exactly {sorted(expected_keys)}")
    try:
        if redactions:  # markers count as the values they replaced, at the paths redacted events name
            args_digest = redacted_digest(data["args"], redactions, ("args",))
            context_digest = redacted_digest(data.get("context"), redactions, ("context",))
        else:
            args_digest = value_digest(data["args"])
            context_digest = value_digest(data["context"]) if isinstance(event, ev.Proposed) else None
        if args_digest != event.args_digest:
            return problem("data", "the stored arguments do not match their digest in the chain")
        if isinstance(event, ev.Proposed) and context_digest != event.context_digest:
            return problem("data", "the stored context does not match its digest in the chain")
    except ArgumentsError as exc:
        return problem("data", f"the stored data is not a JSON value: {exc}")
    for parts, digest in (redactions or {}).items():
        if any(parts[:n] in redactions for n in range(2, len(parts))):
            continue  # inside a redacted field: that field's marker or value covers it
        where = f"{format_field_path(parts)} of seq {record.seq}"
        try:
            value = resolve(data, parts)
        except KeyError:
            found.findings[(record.seq, parts)] = f"the redaction names {where}, which does not exist"
            continue
        if not is_marker(value, digest) and redacted_digest(value, redactions, parts) != digest:
            found.findings[(record.seq, parts)] = f"the value at {where} is neither the value announced nor its marker"
    if isinstance(event, ev.Proposed) and event.remembered is not msgspec.UNSET:
        # docs/ledger-format.md section 12: a covered proposal's `session` is its context's
        # `session_id` (a non-empty string), or absent; unless that field was redacted
        context = data.get("context")
        session = context.get("session_id") if isinstance(context, dict) else None
        recorded = event.remembered.session
        if isinstance(session, dict) and REDACTED in session:  # redacted: its marker holds the value's digest
            if recorded is not None and not is_marker(session, value_digest(recorded)):
                return problem("data", f"the proposal records the session {recorded!r} of a standing decision, "
                                       "but its context's redacted session_id is another value")
        else:
            expected = session if isinstance(session, str) and session else None
            if recorded != expected:
                return problem("data", f"the proposal records the session {event.remembered.session!r} of a standing "
                                       f"decision, but its context's session_id is {expected!r}")
    # The chain covers values, not spellings; requiring the one canonical spelling also catches
    # an edit that keeps every value (1e22 → 1E22), so no stored byte changes unnoticed.
    if canonical_spelling(data) != record.data:
        return problem("data", "the stored data is not in its canonical spelling: it was changed after it was written")
    return None
