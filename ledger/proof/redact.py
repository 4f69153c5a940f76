"""Redaction: remove a value (personal data, a secret) from the data stored beside an event,
while `verify` keeps passing.

    redact("ledger-dir", target=12, field="args.card_number", reason="GDPR request #481", by="dpo@example.com")

The chain covers the *digest* of the arguments, not the arguments (docs/ledger-format.md, 5), and
the digest is structural: the digest of an object is made from the digests of its members. So a
value can be replaced by a marker carrying its own digest, `{"$redacted": "<hex>"}`, and the
arguments' digest recomputed from the marker and the remaining values, the way QLDB's redaction
keeps a revision's hash. Two steps, in this order:

1. a `redacted` event is appended to the chain (durably): which event, which path, the digest of
   the value removed, why and by whom;
2. the event's line is rewritten with the marker in place of the value: the segment is written
   anew to a temporary file, synced, renamed over the old one, and the directory synced.

A crash between the two leaves the value in place and the redaction announced; running the same
redaction again completes it. Verify honours a marker only at a path some `redacted` event names
with that digest, and reports every redaction.

Redaction needs the ledger to itself (no Gate or other writer open: the rewritten segment may be
the one they append to), and refuses a request that can still run, whose arguments the Gate still
needs.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import NamedTuple

import msgspec

from ledger import events as ev
from ledger.store import lines
from ledger.clock import Clock, utc_now
from ledger.digest import canonical_json, is_marker, redacted_digest, redaction_marker
from ledger.fieldpath import FieldPathError, format_field_path, parse_field_path, replace, resolve
from ledger.store.log import Ledger, LedgerError, LedgerReader, _fsync_dir, write_all
from ledger.store.scan import read_lines
from ledger.proof.verify import verify
from ledger.workflow.machine import FINAL, Workflow


class RedactionError(LedgerError):
    """The redaction cannot be made: no such event or field, a request that can still run, ..."""


class Redaction(NamedTuple):
    """What `redact` did. `seq` is the `redacted` event's seq; `rewritten` tells whether the line
    was rewritten now (False when an earlier run had already done it)."""

    target: int
    path: str
    value_digest: str
    seq: int
    rewritten: bool


def redact(
    directory: str | Path,
    target: int,
    field: str,
    *,
    reason: str,
    by: str,
    clock: Clock = utc_now,
) -> Redaction:
    """Redact the value at `field` of the data beside event `target`. See the module docstring.

    Raises RedactionError (no such event, no data, no such field, a field inside one already
    redacted, a request that can still run, a ledger that does not verify, a reason or an identity
    that is empty or holds a control character, a file that cannot be written),
    ledger.store.log.LedgerLocked (a Gate or another writer has the ledger open), ledger.store.log.LedgerUnreadable
    (no ledger there: nothing is created), LedgerCorrupt.
    """
    try:
        parts = parse_field_path(field)
    except FieldPathError as exc:
        raise RedactionError(str(exc)) from None
    path = format_field_path(parts)
    if not isinstance(reason, str) or not reason.strip():
        raise RedactionError("a redaction needs a reason (a legal basis, a ticket)")
    if not isinstance(by, str) or not by.strip():
        raise RedactionError("a redaction needs the identity of who makes it")
    for name, text in (("reason", reason), ("by", by)):
        bad = control_character(text)
        if bad is not None:
            raise RedactionError(
                f"the redaction's {name} holds the control character {bad!r}; a line break or an escape "
                "sequence in the ledger would let it pass for other output when it is shown"
            )
    directory = Path(directory)
    LedgerReader(directory)  # LedgerUnreadable for a directory with no ledger, before any file is made
    try:
        return _redact(directory, target, parts, path, reason, by, clock)
    except OSError as exc:  # a read-only directory, a full disk: nothing half-done is left behind
        where = exc.filename or directory
        raise RedactionError(f"cannot write {where}: {exc.strerror or exc}") from None


def control_character(text: str) -> str | None:
    """The first control character (Unicode category Cc: C0, DEL, C1) of `text`, or None."""
    return next((c for c in text if unicodedata.category(c) == "Cc"), None)


def _redact(directory: Path, target: int, parts: tuple, path: str, reason: str, by: str, clock: Clock) -> Redaction:
    with Ledger(directory, create=False, exclusive=True, clock=clock) as led:
        # Only a ledger that verifies is rewritten: redaction must not launder damage.
        report = verify(directory)
        if not report.ok:
            where = f" at seq {report.problem.seq}" if report.problem and report.problem.seq else ""
            raise RedactionError(f"the ledger does not verify{where}; it is not redacted until it does")
        workflow, record, earlier = Workflow(), None, None
        existing: dict[tuple, str] = {}  # the paths of `target` redacted before → their digests
        for rec in LedgerReader(directory).records():
            workflow.step(rec.seq, rec.event)
            if rec.seq == target:
                record = rec
            event = rec.event
            if isinstance(event, ev.Redacted) and event.target == target:
                existing[parse_field_path(event.path)] = event.value_digest
                if event.path == path:
                    earlier = rec
        if record is None:
            raise RedactionError(f"there is no event at seq {target}")
        if not isinstance(record.event, ev.WITH_DATA):
            kind = record.event.__struct_config__.tag
            article = "an" if kind[0] in "aeiou" else "a"
            raise RedactionError(f"seq {target} is {article} {kind} event, which stores no data")
        request = target if isinstance(record.event, ev.Proposed) else record.event.request
        state = workflow.requests[request]
        if state.status not in FINAL:
            raise RedactionError(
                f"request {request} is {state.status} and may still run; its arguments are redacted once it is final"
            )
        for n in range(2, len(parts)):
            if parts[:n] in existing:
                raise RedactionError(f"{path} is inside {format_field_path(parts[:n])}, which is already redacted")
        data = msgspec.json.decode(record.data)
        try:
            value = resolve(data, parts)
        except KeyError:
            raise RedactionError(f"the data of seq {target} has no field {path}") from None
        if earlier is not None and is_marker(value, earlier.event.value_digest):
            return Redaction(target, path, earlier.event.value_digest, earlier.seq, rewritten=False)
        # Markers of fields redacted earlier inside this value count as the values they replaced.
        digest = redacted_digest(value, existing, parts)
        if earlier is None:
            seq = led.append(ev.Redacted(target=target, path=path, value_digest=digest, reason=reason, by=by)).seq
        else:  # announced by a run that stopped before rewriting the line: finish it
            if earlier.event.value_digest != digest:
                raise RedactionError(f"seq {earlier.seq} announced another value at {path} than the one stored")
            seq = earlier.seq
        # The rewrite happens while this writer still holds the ledger exclusively.
        try:
            _rewrite_line(directory / record.segment, record, canonical_json(replace(data, parts, redaction_marker(digest))))
        except OSError as exc:
            raise RedactionError(
                f"cannot write {exc.filename or directory}: {exc.strerror or exc}; the redaction is announced at seq {seq} "
                "and the value is still there: run the same redaction again to finish it"
            ) from None
    return Redaction(target, path, digest, seq, rewritten=True)


_WRITE_BYTES = 1 << 20


def _rewrite_line(segment: Path, record, new_data: bytes) -> None:
    """Replace the data of one line of `segment` (the hashed body is unchanged), crash-safely. The
    segment is copied line by line (ledger.store.scan: bounded memory), the line replaced on the way;
    the new line must be within ledger.store.lines.MAX_LINE_BYTES (a marker is shorter than most values
    it replaces; RedactionError otherwise)."""
    old = lines.compose(record.body, record.data)[1]
    new = lines.compose(record.body, new_data)[1]
    if len(new) - 1 > lines.MAX_LINE_BYTES:
        raise RedactionError(f"the redacted line would be too long: {lines.too_long(len(new) - 1)}")
    temporary = segment.with_name(f".{segment.name}.redact.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            found, pending, held = False, [], 0
            with segment.open("rb") as handle:
                for number, _offset, text, _size, terminated in read_lines(handle):
                    if number == record.line:
                        if text is None or text + b"\n" != old:
                            raise RedactionError(f"{segment.name} line {record.line} changed while it was being redacted")
                        text, found = new[:-1], True
                    elif text is None:  # the ledger verified under this writer's exclusive hold
                        raise RedactionError(f"{segment.name} line {number} changed while it was being redacted")
                    pending.append(text + b"\n" if terminated else text)
                    held += len(text) + 1
                    if held >= _WRITE_BYTES:  # a write per MiB, not per line
                        write_all(fd, b"".join(pending))
                        pending, held = [], 0
            write_all(fd, b"".join(pending))
            if not found:
                raise RedactionError(f"{segment.name} line {record.line} changed while it was being redacted")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, segment)
    except Exception:  # a full disk, a failed sync: no partial copy is left beside the segment
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    _fsync_dir(segment.parent)
