"""Signed checkpoints of a ledger, proofs against them, and the writer's rollback guard.

A hash chain proves nothing against someone who can rewrite every line and recompute every hash.
A *checkpoint* held somewhere else does: it is a signed statement "this ledger had `size` events,
the Merkle root of their hashes was `root`, the last one was `head`", and any later copy of the
ledger must extend it.

- The tree (ledger.proof.merkle, RFC 9162 hashing): leaf i is the 32 raw bytes of the stored `hash` of
  line i + 1 (the event with seq i + 1).
- The checkpoint is a C2SP tlog-checkpoint inside a C2SP signed note, signed with Ed25519:

      countersign.example/ledger/<ledger_id>
      <size>
      <base64 root>
      head <hex hash of the event with seq = size>
      time <UTC time of signing, YYYY-MM-DDTHH:MM:SS.ffffffZ>

      — <key name> <base64(4-byte key id || 64-byte Ed25519 signature)>

- Keys: the private key is a PKCS#8 PEM file (mode 0600) preceded by a `Key-Name: NAME` line;
  the public key file holds the signed-note verifier key `NAME+<8 hex key id>+<base64(0x01 ||
  32-byte public key)>`. The key id is SHA-256(name || 0x0A || 0x01 || public key)[:4].
- An inclusion proof file (JSON) carries one event's stored line, its seq, the tree size and
  two inclusion paths (the event's, and the head's), so that `verify_proof_file` needs nothing
  but the proof, the checkpoint and the public key.

docs/ledger-format.md, section "Checkpoints and proofs", is the byte-exact definition.

Errors: `MalformedError` (exit code 2: a file is not what it claims to be) and
`VerificationError` (exit code 1: a well-formed signature, proof or ledger does not check out).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Iterator, Literal

import msgspec

from dsl.jsoninput import strict_decoder
from ledger import events as ev
from ledger.store import lines
from ledger.proof import merkle
from ledger.proof.verify import Problem, Redactions, Report, check_record, finish_report, verify
from ledger.store.scan import last_line, last_newline
from ledger.clock import Clock, format_ts, parse_ts, utc_now
from ledger.fieldpath import FieldPathError, format_field_path, parse_field_path
from ledger.workflow.machine import Violation, Workflow
from ledger.proof.keys import (  # noqa: F401 (the keys' names, re-exported: they were defined here first)
    DEFAULT_KEY_NAME, ED25519, KEY_NAME_HEADER, MAX_NOTE_BYTES, CheckpointError, MalformedError, PublicKey, SigningKey,
    VerificationError, _valid_name, b64, generate_key, key_id, load_public_key, load_signing_key, read_file, unb64,
    write_keypair, write_new,
)
from ledger.store.log import LedgerCorrupt, LedgerError, LedgerReader, LedgerUnreadable, RawLine, list_segments, parse_line, segment_name

ORIGIN_PREFIX = "countersign.example/ledger/"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_SUFFIX = ".checkpoint"
PROOF_FORMAT = "countersign-proof/1"
MAX_SIGNATURES = 100
MAX_PROOF_BYTES = 2 * lines.MAX_LINE_BYTES + (1 << 20)
"""The largest proof file read: its line (at most MAX_LINE_BYTES, each `"` and `\\` escaped as two
bytes in the JSON string) and 1 MiB for the paths and the other members."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")
_LEDGER_ID = re.compile(r"[\x21-\x2a\x2c-\x7e]{1,200}")  # printable ASCII, no space, no '+'


def origin_of(ledger_id: str) -> str:
    return ORIGIN_PREFIX + ledger_id


class CheckpointConflict(LedgerError):
    """The writer refuses to extend a ledger that does not match its own latest checkpoint."""


# --- checkpoints ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """The signed statement: ledger `ledger_id` had `size` events, with Merkle root `root` (32
    bytes) and last event hash `head` (hex), at UTC time `time`."""

    ledger_id: str
    size: int
    root: bytes
    head: str
    time: str

    @property
    def origin(self) -> str:
        return origin_of(self.ledger_id)

    def body(self) -> bytes:
        """The note text (what is signed), ending in a newline."""
        return (
            f"{self.origin}\n{self.size}\n{b64(self.root)}\nhead {self.head}\ntime {self.time}\n"
        ).encode("utf-8")


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes


def sign_checkpoint(checkpoint: Checkpoint, key: SigningKey) -> bytes:
    """The signed note: body, a blank line, one signature line."""
    _check_fields(checkpoint)
    body = checkpoint.body()
    sig = key.sign(body)
    return body + b"\n" + f"\u2014 {key.name} {b64(key.public.id + sig)}\n".encode("utf-8")


def _check_fields(cp: Checkpoint) -> None:
    if not _LEDGER_ID.fullmatch(cp.ledger_id):
        raise MalformedError("the ledger id must be printable ASCII without spaces or '+' to be part of an origin")
    if cp.size < 1:
        raise MalformedError("a checkpoint covers at least the genesis event")
    if len(cp.root) != merkle.HASH_SIZE or not _HEX64.fullmatch(cp.head):
        raise MalformedError("the root is 32 bytes and the head 64 lowercase hex digits")
    try:
        parse_ts(cp.time)
    except ValueError:
        raise MalformedError(f"the time {cp.time!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ") from None


def parse_checkpoint(note: bytes) -> tuple[Checkpoint, bytes, list[NoteSignature]]:
    """Split and parse a signed checkpoint: `(checkpoint, signed body, signatures)`. Checks the
    syntax of every line, not the signatures. Raises MalformedError."""
    if len(note) > MAX_NOTE_BYTES:
        raise MalformedError("the checkpoint is too large")
    try:
        text = note.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedError("the checkpoint is not UTF-8") from None
    if any(ord(c) < 0x20 and c != "\n" for c in text) or "\x7f" in text:
        raise MalformedError("the checkpoint contains a control character")
    if not text.endswith("\n"):
        raise MalformedError("the checkpoint does not end with a newline")
    cut = text.rfind("\n\n")
    if cut < 0:
        raise MalformedError("the checkpoint has no blank line before its signatures")
    body, sig_text = text[: cut + 1], text[cut + 2 :]
    signatures = []
    sig_lines = sig_text.split("\n")[:-1]
    if not sig_lines:
        raise MalformedError("the checkpoint has no signature")
    if len(sig_lines) > MAX_SIGNATURES:
        raise MalformedError(f"the checkpoint has more than {MAX_SIGNATURES} signatures")
    for line in sig_lines:
        if not line.startswith("\u2014 "):
            raise MalformedError("a signature line does not start with an em dash (U+2014) and a space")
        parts = line[2:].split(" ")
        if len(parts) != 2 or not _valid_name(parts[0]):
            raise MalformedError("a signature line is not '— NAME BASE64'")
        raw = unb64(parts[1], "a signature")
        if len(raw) < 5:
            raise MalformedError("a signature is shorter than a key id and one byte")
        signatures.append(NoteSignature(parts[0], raw[:4], raw[4:]))
    lines_ = body.split("\n")[:-1]
    if len(lines_) != 5:
        raise MalformedError(
            f"the checkpoint body has {len(lines_)} lines; it has exactly 5: origin, size, root, head, time"
        )
    origin, size, root, head, time = lines_
    if not origin.startswith(ORIGIN_PREFIX) or not _LEDGER_ID.fullmatch(origin[len(ORIGIN_PREFIX) :]):
        raise MalformedError(f"the origin {origin!r} is not {ORIGIN_PREFIX}<ledger id>")
    if not _SIZE.fullmatch(size):
        raise MalformedError(f"the tree size {size!r} is not a decimal number without leading zeros")
    root_bytes = unb64(root, "the root hash")
    if len(root_bytes) != merkle.HASH_SIZE:
        raise MalformedError("the root hash is not 32 bytes")
    if not head.startswith("head ") or not _HEX64.fullmatch(head[5:]):
        raise MalformedError("the fourth line is not 'head <64 lowercase hex digits>'")
    if not time.startswith("time "):
        raise MalformedError("the fifth line is not 'time <YYYY-MM-DDTHH:MM:SS.ffffffZ>'")
    cp = Checkpoint(origin[len(ORIGIN_PREFIX) :], int(size), root_bytes, head[5:], time[5:])
    _check_fields(cp)
    if cp.body() != body.encode("utf-8"):  # one spelling only
        raise MalformedError("the checkpoint body is not in its one canonical spelling")
    return cp, body.encode("utf-8"), signatures


def verify_checkpoint(note: bytes, key: PublicKey) -> Checkpoint:
    """Parse a signed checkpoint and check its signature by `key` (C2SP signed-note rules:
    signatures by other keys are ignored; one by `key` that fails rejects the note; at least one
    by `key` must verify). Raises MalformedError or VerificationError."""
    cp, body, signatures = parse_checkpoint(note)
    mine = [s for s in signatures if s.name == key.name and s.key_id == key.id]
    if not mine:
        names = ", ".join(sorted({f"{s.name}+{s.key_id.hex()}" for s in signatures}))  # the id tells keys of one name apart
        raise VerificationError(f"the checkpoint is not signed by the key {key.name}+{key.id.hex()} (signed by: {names})")
    for s in mine:
        if not key.verify(s.signature, body):
            raise VerificationError(f"the checkpoint's signature by {key.name} does not verify: it was altered or forged")
    return cp


def read_checkpoint(path: str | Path, key: PublicKey | None) -> Checkpoint:
    """Read a checkpoint file; with `key`, verify its signature too."""
    data = read_file(path, "the checkpoint")
    try:
        return verify_checkpoint(data, key) if key is not None else parse_checkpoint(data)[0]
    except CheckpointError as exc:
        raise type(exc)(f"{path}: {exc}") from None


# --- the ledger's leaves ------------------------------------------------------------------------


def _leaves(path: str | Path, limit: int | None = None) -> Iterator[tuple[RawLine, str]]:
    """(raw line, stored hash) for the first `limit` complete lines of a ledger (all if None)."""
    if limit == 0:
        return
    for n, raw in enumerate(LedgerReader(path).lines(), start=1):
        try:
            _, digest, _ = lines.split(raw.text)
        except lines.LineError as exc:
            raise VerificationError(f"seq {n}: {exc}") from None
        yield raw, digest
        if limit is not None and n >= limit:
            return


def _genesis_id(raw: RawLine) -> str:
    record = parse_line(raw, 1)
    if not isinstance(record.event, ev.Genesis):
        raise VerificationError("the first event is not the genesis")
    return record.event.ledger_id


def ledger_tail(path: str | Path) -> tuple[int, str | None, str | None]:
    """`(size, head hash, ledger id)` of a ledger, reading only its first and last lines (a torn
    last line is not part of the ledger). `(0, None, None)` when it has no events. Each of the
    two lines is read in bounded memory (ledger.store.scan); LedgerCorrupt when one is longer than
    ledger.store.lines.MAX_LINE_BYTES or is not an event."""
    path = Path(path)
    segments = list_segments(path)
    ledger_id = None
    if segments:
        with segments[0].open("rb") as handle:
            first = handle.readline(lines.MAX_LINE_BYTES + 1)
        if first.endswith(b"\n"):
            ledger_id = _genesis_id(RawLine(segments[0].name, 1, 0, first[:-1]))
        elif len(first) > lines.MAX_LINE_BYTES:
            raise LedgerCorrupt(1, f"the first line is longer than the limit of {lines.MAX_LINE_BYTES:,} bytes", segments[0].name, 1)
    for segment in reversed(segments):
        size = segment.stat().st_size
        with segment.open("rb") as handle:
            end = last_newline(handle, size)  # backwards in chunks: a torn tail of any size
            if end < 0:
                continue
            start, text = last_line(handle, end + 1)
        if text is None:
            raise LedgerCorrupt(None, f"the last line of {segment.name} (at byte {start}): {lines.too_long(end - start)}", segment.name)
        record = parse_line(RawLine(segment.name, 0, start, text), -1)
        return record.seq, record.hash, ledger_id
    return 0, None, ledger_id


# --- checkpoints kept in the ledger directory ---------------------------------------------------


def checkpoint_files(path: str | Path) -> list[Path]:
    cdir = Path(path) / CHECKPOINTS_DIR
    if not cdir.is_dir():
        return []
    return sorted(p for p in cdir.iterdir() if p.name.endswith(CHECKPOINT_SUFFIX) and not p.name.startswith("."))


def latest_checkpoint(path: str | Path) -> tuple[Path, Checkpoint] | None:
    """The checkpoint of the largest size in DIR/checkpoints/ (signatures not checked: these are
    the ledger's own). Raises MalformedError for a file there that is not a checkpoint."""
    best = None
    for p in checkpoint_files(path):
        cp = read_checkpoint(p, None)
        if best is None or cp.size > best[1].size:
            best = (p, cp)
    return best


def behind_checkpoint(path: str | Path) -> str | None:
    """What is wrong, if anything, between the ledger at `path` and its latest checkpoint in
    DIR/checkpoints/ (signatures not checked): the ledger is shorter than the checkpoint, is of its
    size but ends in another head, or is another ledger; or a file there is not a checkpoint.
    None when they agree or there are no checkpoints. Costs one directory listing when there are
    none, and reads only the first and last lines of the ledger otherwise (LedgerCorrupt when
    one of those is not an event)."""
    try:
        latest = latest_checkpoint(path)
    except MalformedError as exc:
        return f"{path}: {exc}"
    if latest is None:
        return None
    where, cp = latest
    try:
        size, head, ledger_id = ledger_tail(path)
    except VerificationError as exc:
        return f"{path}: {exc}"
    name = f"{CHECKPOINTS_DIR}/{where.name}"
    if size < cp.size:
        return f"{path}: the ledger has {size} events but its checkpoint {name} covers {cp.size}: it was truncated or rolled back"
    if ledger_id is not None and ledger_id != cp.ledger_id:
        return f"{path}: the checkpoint {name} is for ledger {cp.ledger_id}, not {ledger_id}"
    if size == cp.size and head != cp.head:
        return f"{path}: the last event (seq {size}) is not the head of the checkpoint {name}: the ledger was rewritten"
    return None


def refuse_if_behind_checkpoint(path: str | Path) -> None:
    """Raise CheckpointConflict if the ledger at `path` contradicts its latest checkpoint in
    DIR/checkpoints/ (`behind_checkpoint`), or a file there is not a checkpoint. Called by the
    writer before it appends anything."""
    problem = behind_checkpoint(path)
    if problem is not None:
        raise CheckpointConflict(f"{problem}; refusing to append")



def save_checkpoint(path: str | Path, checkpoint: Checkpoint, note: bytes) -> Path:
    """Write a signed checkpoint into DIR/checkpoints/ atomically (temporary file, fsync, link);
    never replaces a file. Returns its path. Raises MalformedError (exit code 2) naming the path
    that cannot be written (a read-only directory, a full disk); no partial file is left."""
    try:
        return _save_checkpoint(Path(path) / CHECKPOINTS_DIR, checkpoint, note)
    except OSError as exc:
        raise MalformedError(f"cannot write {exc.filename or Path(path) / CHECKPOINTS_DIR}: {exc.strerror or exc}") from None


def _save_checkpoint(cdir: Path, checkpoint: Checkpoint, note: bytes) -> Path:
    cdir.mkdir(exist_ok=True)
    stamp = re.sub(r"[-:.]", "", checkpoint.time)
    base = f"{checkpoint.size:012d}-{stamp}"
    tmp = cdir / f".{base}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.write(fd, note)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        n = 1
        while True:
            target = cdir / (base + (f".{n}" if n > 1 else "") + CHECKPOINT_SUFFIX)
            try:
                os.link(tmp, target)
                break
            except FileExistsError:
                n += 1
    finally:
        tmp.unlink()
    dfd = os.open(cdir, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return target


# --- making a checkpoint -------------------------------------------------------------------------


def make_checkpoint(path: str | Path, key: SigningKey, clock: Clock = utc_now) -> tuple[Checkpoint, bytes]:
    """Verify the ledger in full, check it extends every checkpoint already in DIR/checkpoints/,
    and sign a checkpoint of all its events. Returns `(checkpoint, signed note)`; does not save
    it. Raises VerificationError (the ledger fails verification or contradicts an earlier
    checkpoint), LedgerUnreadable."""

    report = verify(path)
    if report.unreadable is not None:
        raise LedgerUnreadable(report.unreadable)
    if report.problem is not None:
        p = report.problem
        where = f"seq {p.seq}" if p.seq is not None else "head"
        raise VerificationError(f"{path}: the ledger does not verify ({where}: {p.kind}: {p.message}); refusing to sign it")
    earlier = []
    for f in checkpoint_files(path):
        try:
            earlier.append((f, read_checkpoint(f, None)))
        except MalformedError as exc:
            raise VerificationError(f"{exc}; refusing to sign until it is fixed or removed") from None
    stream = merkle.TreeStream(snapshot_sizes=[cp.size for _, cp in earlier])
    ledger_id, hashes = None, {}
    wanted = {cp.size for _, cp in earlier}
    for n, (raw, digest) in enumerate(_leaves(path, report.count), start=1):
        if n == 1:
            ledger_id = _genesis_id(raw)
        if n in wanted:
            hashes[n] = digest
        stream.append(merkle.leaf_hash(bytes.fromhex(digest)))
    if stream.size != report.count:
        raise VerificationError(f"{path}: the ledger changed while it was read")
    for f, cp in earlier:
        name = f"{CHECKPOINTS_DIR}/{f.name}"
        if cp.ledger_id != ledger_id:
            raise VerificationError(f"{name} is for ledger {cp.ledger_id}, not {ledger_id}; refusing to sign")
        if cp.size > stream.size:
            raise VerificationError(f"the ledger has {stream.size} events but {name} covers {cp.size}; refusing to sign")
        if stream.roots[cp.size] != cp.root or hashes[cp.size] != cp.head:
            raise VerificationError(f"the ledger does not extend {name} (its first {cp.size} events differ); refusing to sign")
    cp = Checkpoint(ledger_id, stream.size, stream.root(), report.head, format_ts(clock()))
    return cp, sign_checkpoint(cp, key)


# --- verifying a ledger against a checkpoint -----------------------------------------------------


@dataclass
class CheckpointCheck:
    """What `verify_against_checkpoint` found beside the Report: the trusted checkpoint, the
    ledger's tree (size and root) and the consistency proof from the checkpoint's tree to it."""

    checkpoint: Checkpoint
    size: int = 0
    root: bytes = b""
    proof: list[bytes] = field(default_factory=list)
    incremental: bool = False
    ledger_id: str | None = None  # the genesis's
    head: str | None = None  # the stored hash at seq checkpoint.size

    def to_dict(self) -> dict:
        return {
            "checkpoint": {
                "ledger_id": self.checkpoint.ledger_id,
                "size": self.checkpoint.size,
                "root": self.checkpoint.root.hex(),
                "head": self.checkpoint.head,
                "time": self.checkpoint.time,
            },
            "tree_size": self.size,
            "root": self.root.hex(),
            "consistency_proof": [h.hex() for h in self.proof],
            "incremental": self.incremental,
        }


def verify_against_checkpoint(path: str | Path, checkpoint: Checkpoint, *, expect_head: str | None = None, incremental: bool = False,
                              engine: str = "auto"):
    """Verify a ledger and that it extends a trusted (already signature-checked) checkpoint:
    at least as long, same ledger id, the event at seq `size` is the head, and a consistency
    proof from the checkpoint's tree to the ledger's whole tree verifies. Returns `(Report,
    CheckpointCheck)`; a failed checkpoint check is the Report's problem, of kind `checkpoint`.

    With `incremental`, the events up to the checkpoint are not verified in full: see
    `_verify_incremental` (which is the reference verifier's). Otherwise `engine` is
    ledger.proof.verify.verify's.
    """

    check = CheckpointCheck(checkpoint, incremental=incremental)
    if incremental:
        report = _verify_incremental(path, checkpoint, check, expect_head)
    else:
        report = verify(path, expect_head=expect_head, engine=engine)
    if not report.ok:
        return report, check

    def failed(message: str, seq: int | None = None):
        report.problem = Problem(seq, "checkpoint", message)
        return report, check

    m = checkpoint.size
    if report.count < m:
        return failed(
            f"the ledger has {report.count} events but the checkpoint covers {m}: it was truncated or rolled back to an older copy",
            report.count + 1,  # the first event the checkpoint vouches for that is missing
        )
    if not incremental:  # a second pass over the stored hashes only
        stream = merkle.TreeStream(old_size=m)
        ledger_id, head = None, None
        for n, (raw, digest) in enumerate(_leaves(path, report.count), start=1):
            if n == 1:
                ledger_id = _genesis_id(raw)
            if n == m:
                head = digest
            stream.append(merkle.leaf_hash(bytes.fromhex(digest)))
        if stream.size != report.count:
            return failed("the ledger changed while it was verified")
        check.size, check.root = stream.size, stream.root()
        check.proof = stream.consistency_proof()
        check.ledger_id, check.head = ledger_id, head
    if check.ledger_id != checkpoint.ledger_id:
        return failed(f"the checkpoint is for ledger {checkpoint.ledger_id}, this is ledger {check.ledger_id}", 1)
    try:
        merkle.verify_consistency(m, check.size, checkpoint.root, check.root, check.proof)
    except merkle.ProofError as exc:
        return failed(
            f"the ledger does not extend the checkpoint's tree of {m} events ({exc}): events up to seq {m} were "
            "rewritten or replaced"
        )
    if check.head != checkpoint.head:
        return failed(f"the event at seq {m} is not the checkpoint's head", m)
    return report, check


def _verify_incremental(path, checkpoint: Checkpoint, check: CheckpointCheck, expect_head: str | None):
    """Verify from a trusted checkpoint. For the events up to seq `checkpoint.size` (the prefix)
    this checks only what the signed root does not already fix and what the workflow replay
    needs: each line's layout and decoding, seq, prev, that SHA-256 of the body is the stored
    hash (so the bodies replayed are the ones the root covers), the genesis rule, and the
    workflow rules; the prefix's stored hashes must give the checkpoint's root, and the hash at
    seq `size` its head. Not checked in the prefix: the canonical layout of bodies and the
    spelling of timestamps (both fixed by the hashes, and checked when the checkpoint was made,
    which signs only a ledger that verifies in full), and the DATA beside each body (arguments
    and context, which no hash covers: an edit of them before the checkpoint goes unnoticed;
    run a full verify for that). Every event after the checkpoint is verified in full.
    """
    import hashlib as _hashlib


    report = Report(path=str(path))
    try:
        reader = LedgerReader(path)
    except LedgerUnreadable as exc:
        report.unreadable = str(exc)
        return report
    m = checkpoint.size
    redactions = Redactions.collect(path)
    stream = merkle.TreeStream(old_size=m)
    workflow = Workflow(keep_final=False, edit_targets=redactions.paths)
    prev, expected, head_seen_at, prev_ts = ev.GENESIS_PREV, 1, None, ""

    def bad(kind: str, message: str, seq: int, record=None, code=None):
        report.problem = Problem(seq, kind, message, code, getattr(record, "segment", None), getattr(record, "line", None))
        return report

    try:
        for raw in reader.lines():
            try:
                record = parse_line(raw, expected)
            except LedgerCorrupt as exc:
                return bad("format", exc.message, expected, raw)
            if expected <= m:
                event = record.event
                if record.seq != expected:
                    return bad("chain", f"seq is {record.seq}, expected {expected} (a gap, a duplicate or a reordering)", expected, record)
                if event.prev != prev:
                    return bad("chain", "prev is not the previous event's hash", expected, record)
                if _hashlib.sha256(record.body).hexdigest() != record.hash:
                    return bad("chain", "the hash does not match the body: the event was changed after it was written", expected, record)
                if (expected == 1) != isinstance(event, ev.Genesis):
                    return bad("format", "the first event, and only the first, is the genesis", expected, record)
            else:
                problem = check_record(record, expected, prev, prev_ts, redactions)
                if problem is not None:
                    report.problem = problem
                    return report
            if expected == 1:
                check.ledger_id = record.event.ledger_id if isinstance(record.event, ev.Genesis) else None
                if check.ledger_id != checkpoint.ledger_id:
                    return bad("checkpoint", f"the checkpoint is for ledger {checkpoint.ledger_id}, this is ledger {check.ledger_id}", 1, record)
            try:
                workflow.step(record.seq, record.event)
            except Violation as exc:
                return bad("workflow", exc.message, record.seq, record, exc.code)
            if isinstance(record.event, ev.Redacted):
                e = record.event
                if expected > m and (problem := redactions.announcement_problem(record)):
                    report.problem = problem
                    return report
                report.redactions.append(
                    f"seq {record.seq}: the value at {e.path} of seq {e.target} was redacted by {e.by} ({e.reason})"
                )
            stream.append(merkle.leaf_hash(bytes.fromhex(record.hash)))
            if expected == m:
                check.head = record.hash
                if stream.root() != checkpoint.root:
                    return bad(
                        "checkpoint",
                        f"the stored hashes of the first {m} events do not give the checkpoint's root: some event up to seq {m} "
                        "was changed or replaced (a verify against the checkpoint without --from-checkpoint checks each one)",
                        m,
                        record,
                    )
            prev, report.count, report.head = record.hash, record.seq, record.hash
            prev_ts = record.event.ts
            if expect_head is not None and record.hash == expect_head:
                head_seen_at = record.seq
            expected += 1
    except LedgerUnreadable as exc:
        report.unreadable = str(exc)
        return report
    except LedgerCorrupt as exc:
        report.problem = Problem(expected, "format", exc.message, segment=exc.segment, line=exc.line)
        return report
    if report.count == 0:
        return bad("format", "the ledger has no events", 1)
    completed = finish_report(report, reader, expected, prev, prev_ts, workflow, redactions, expect_head, head_seen_at,
                              complete_tail=expected > m)
    if report.problem is not None:
        return report
    if completed is not None:  # counted as verify counts it: a leaf of the tree too
        stream.append(merkle.leaf_hash(bytes.fromhex(completed.hash)))
    report.warnings.append(
        f"incremental: events 1 to {min(m, report.count)} were checked against the checkpoint's root, "
        "not in full (their arguments and context were not checked)"
    )
    check.size, check.root = stream.size, stream.root()
    if stream.size >= m:
        check.proof = stream.consistency_proof()
    return report


# --- inclusion proofs --------------------------------------------------------------------------

Hex64 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$", min_length=64, max_length=64)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]


class ProofRedaction(msgspec.Struct, forbid_unknown_fields=True):
    """A field of the proven event's data that was redacted (docs/ledger-format.md, 10)."""

    path: str
    value_digest: Hex64


class ProofFile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """An inclusion proof file (JSON, members in this order). `redactions` is present only
    when some field of the event's data was redacted."""

    format: Literal["countersign-proof/1"]
    ledger_id: str
    seq: Positive
    tree_size: Positive
    line: str  # the event's stored line, without its newline
    inclusion: list[Hex64]  # PATH(seq - 1, D[0:tree_size]), hex
    head_inclusion: list[Hex64]  # PATH(tree_size - 1, D[0:tree_size]), hex
    redactions: list[ProofRedaction] = []

    def encode(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2) + b"\n"


def make_proof(path: str | Path, seq: int, checkpoint: Checkpoint | None = None) -> ProofFile:
    """An inclusion proof for the event `seq` in the tree of the checkpoint's size (or, without a
    checkpoint, of the ledger's current size). With a checkpoint, the ledger's tree of that size
    must have the checkpoint's root and head. Raises MalformedError (seq out of range),
    VerificationError (the ledger does not match, or the event is damaged), LedgerUnreadable (no
    such directory, no ledger in it)."""

    LedgerReader(path)  # LedgerUnreadable: no such directory, not a ledger
    size = checkpoint.size if checkpoint is not None else ledger_tail(path)[0]
    if size < 1:
        raise MalformedError(f"{path}: the ledger has no events")
    if not 1 <= seq <= size:
        raise MalformedError(f"seq {seq} is not in a tree of {size} events (1 to {size})")
    stream = merkle.TreeStream(indices=(seq - 1, size - 1))
    ledger_id = line = head = None
    for n, (raw, digest) in enumerate(_leaves(path, size), start=1):
        if n == 1:
            ledger_id = _genesis_id(raw)
        if n == seq:
            line = raw
        if n == size:
            head = digest
        stream.append(merkle.leaf_hash(bytes.fromhex(digest)))
    if stream.size < size:
        raise VerificationError(f"{path}: the ledger has {stream.size} events, fewer than the checkpoint's {size}")
    try:
        record = parse_line(line, seq)
    except LedgerCorrupt as exc:
        raise VerificationError(f"{path}: seq {seq} is damaged: {exc.message}") from None
    # A redaction may come after the tree's size: the line is proven as it is stored now.
    redacted = Redactions.collect(path).of(seq) or {}
    found = Redactions({seq: redacted})
    problem = check_record(record, seq, record.event.prev, redactions=found)
    if problem is None and found.findings:
        problem = next(iter(found.findings.values()))
        raise VerificationError(f"{path}: a redaction of seq {seq} does not hold: {problem}")
    if problem is not None:
        raise VerificationError(f"{path}: seq {seq} is damaged: {problem.message}")
    if checkpoint is not None:
        if ledger_id != checkpoint.ledger_id:
            raise VerificationError(f"{path}: the checkpoint is for ledger {checkpoint.ledger_id}, this is ledger {ledger_id}")
        if stream.root() != checkpoint.root or head != checkpoint.head:
            raise VerificationError(f"{path}: the ledger's first {size} events do not match the checkpoint: they were rewritten")
    try:
        text = line.text.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError(f"{path}: seq {seq} is not UTF-8") from None
    return ProofFile(
        format=PROOF_FORMAT,
        ledger_id=ledger_id,
        seq=seq,
        tree_size=size,
        line=text,
        inclusion=[h.hex() for h in stream.inclusion_proof(seq - 1)],
        head_inclusion=[h.hex() for h in stream.inclusion_proof(size - 1)],
        redactions=[ProofRedaction(format_field_path(p), d) for p, d in sorted(redacted.items(), key=lambda i: format_field_path(i[0]))],
    )


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 20:  # beyond any seq or size (and Python's int parsing limit)
        raise MalformedError(f"malformed proof: it holds a number of {len(text)} digits")
    return int(text)


_PROOF_DECODER = strict_decoder(parse_int=_bounded_int)  # dsl.jsoninput's rules, integers bounded


def parse_proof(data: bytes) -> ProofFile:
    """Decode a proof file strictly: UTF-8 JSON, exactly the members of ProofFile, each once, with
    their types and ranges, and text that is Unicode (no lone surrogate escape). Raises
    MalformedError, for input of any shape (nested a million levels deep, a number of thousands
    of digits)."""
    try:
        value = _PROOF_DECODER.decode(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedError(f"the proof is not JSON: {exc}") from None
    except RecursionError:
        raise MalformedError("malformed proof: it nests too deeply (a proof is an object of lists of hashes)") from None
    except ValueError as exc:  # from the json module or int(), on input no proof holds
        raise MalformedError(f"the proof is not JSON: {exc}") from None
    if isinstance(value, dict) and value.get("redactions") == []:
        raise MalformedError("the proof's redactions member is empty: it is absent when nothing was redacted")
    try:
        proof = msgspec.convert(value, ProofFile, strict=True)
    except msgspec.ValidationError as exc:
        raise MalformedError(f"the proof is not a {PROOF_FORMAT} proof: {exc}") from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedError("the proof's text holds a lone surrogate escape (not Unicode)") from None
    return proof


@dataclass
class ProvenEvent:
    """What a verified proof shows: the event (a Record), its seq, and the checkpoint."""

    record: object
    proof: ProofFile
    checkpoint: Checkpoint


def verify_proof(data: bytes, checkpoint_note: bytes, key: PublicKey) -> ProvenEvent:
    """Check a proof file with nothing but it, a signed checkpoint and the public key:
    the checkpoint's signature; the proof's ledger id and tree size equal the checkpoint's; the
    event's line is well formed, its body hashes to its stored hash, its seq is the proof's and
    its data matches its digests; the event's inclusion path leads from its stored hash, at
    index seq - 1, to the checkpoint's root; the head's path leads from the checkpoint's head, at
    index tree_size - 1, to the same root. Raises MalformedError or VerificationError."""

    checkpoint = verify_checkpoint(checkpoint_note, key)
    proof = parse_proof(data)
    if proof.ledger_id != checkpoint.ledger_id:
        raise VerificationError(f"the proof is for ledger {proof.ledger_id}, the checkpoint for {checkpoint.ledger_id}")
    if proof.tree_size != checkpoint.size:
        raise VerificationError(
            f"the proof is for a tree of {proof.tree_size} events, the checkpoint covers {checkpoint.size}"
        )
    if proof.seq > proof.tree_size:
        raise VerificationError(f"seq {proof.seq} is past the end of a tree of {proof.tree_size} events")
    if "\n" in proof.line:
        raise MalformedError("the proof's line contains a newline")
    try:
        line = proof.line.encode("utf-8")
        if len(line) > lines.MAX_LINE_BYTES:  # no ledger holds it (docs/ledger-format.md, section 2)
            raise VerificationError(f"the proof's line is not a ledger event: {lines.too_long(len(line))}")
        record = parse_line(RawLine("proof", 1, 0, line), proof.seq)
    except (LedgerCorrupt, UnicodeEncodeError) as exc:
        raise VerificationError(f"the proof's line is not a ledger event: {getattr(exc, 'message', exc)}") from None
    except RecursionError:
        raise MalformedError("the proof's line nests too deeply to be a ledger event") from None
    redacted: dict[tuple, str] = {}
    for r in proof.redactions:
        shown = repr(r.path) if len(r.path) <= 80 else repr(r.path[:80]) + "..."
        try:
            parts = parse_field_path(r.path)
        except FieldPathError as exc:
            raise MalformedError(f"the proof's redaction {shown} is not a field path: {exc}") from None
        if format_field_path(parts) != r.path or parts in redacted:
            raise MalformedError(f"the proof's redaction {shown} is not canonical or is repeated")
        redacted[parts] = r.value_digest
    found = Redactions({proof.seq: redacted})
    try:
        problem = check_record(record, proof.seq, record.event.prev, redactions=found)
    except RecursionError:
        raise MalformedError("the proof's line nests too deeply to be a ledger event") from None
    if problem is None and found.findings:
        raise VerificationError(f"the proof's redaction does not hold: {next(iter(found.findings.values()))}")
    if problem is not None:
        raise VerificationError(f"the proof's line (seq {proof.seq}) is not intact: {problem.message}")
    if isinstance(record.event, ev.Genesis) and record.event.ledger_id != proof.ledger_id:
        raise VerificationError("the proven genesis names another ledger id")
    leaf = merkle.leaf_hash(bytes.fromhex(record.hash))
    path = [bytes.fromhex(h) for h in proof.inclusion]
    head_path = [bytes.fromhex(h) for h in proof.head_inclusion]
    try:
        merkle.verify_inclusion(proof.seq - 1, proof.tree_size, leaf, path, checkpoint.root)
    except merkle.ProofError as exc:
        raise VerificationError(f"the event's inclusion proof does not verify: {exc}") from None
    try:
        merkle.verify_inclusion(
            proof.tree_size - 1, proof.tree_size, merkle.leaf_hash(bytes.fromhex(checkpoint.head)), head_path, checkpoint.root
        )
    except merkle.ProofError as exc:
        raise VerificationError(f"the checkpoint's head is not the last event of its tree: {exc}") from None
    return ProvenEvent(record, proof, checkpoint)
