"""Checkpoint and proof commands: `ledger keygen`, `ledger checkpoint`, `ledger prove`,
`verify-proof`, and `ledger verify --checkpoint` (ledger.proof.checkpoint does the work).

Exit codes: 0 the check holds; 1 a check failed (bad signature, inconsistent ledger, a proof
that does not verify); 2 bad input (a missing or malformed file, a seq out of range).
"""

from pathlib import Path
from typing import NoReturn, Optional

import typer

from cli.output import EXIT_FAIL, EXIT_USAGE, echo_json, fail, say, verified_before


def _fail(exc: Exception) -> NoReturn:
    fail(str(exc), getattr(exc, "exit_code", EXIT_USAGE))


def keygen(
    out: str = typer.Option(..., "--out", help="Writes OUT.key (the private key, mode 0600) and OUT.pub."),
    name: str = typer.Option("countersign.example/signer", "--name", help="The key's name (no spaces, no '+')."),
) -> None:
    """Make an Ed25519 key pair for signing checkpoints, or a reviewer's decisions.

    OUT.key is a PEM private key (keep it secret); OUT.pub is the verifier key to give auditors,
    or to put in a reviewer's `keys` in the roster (`review approve ... --key OUT.key`). A
    reviewer's key is best named after the account (`--name "$(id -un)"`): the roster, not the
    name, says whose it is.

    Example: countersign ledger keygen --out keys/ledger
    """
    from ledger.proof.checkpoint import CheckpointError, generate_key, write_keypair

    try:
        key_path, pub_path = write_keypair(out, generate_key(name))
    except CheckpointError as exc:
        _fail(exc)
    typer.echo(f"wrote {key_path} (private, mode 0600) and {pub_path}")
    typer.echo(pub_path.read_text().rstrip("\n"))


def checkpoint(
    directory: str = typer.Argument(..., help="The ledger directory."),
    key: str = typer.Option(..., "--key", help="The private key file (from `ledger keygen`)."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the checkpoint here instead of DIR/checkpoints/."),
) -> None:
    """Verify the ledger in full and sign a checkpoint of it (size, Merkle root, head, time).

    Refuses (exit 1) a ledger that does not verify or that contradicts a checkpoint already in
    DIR/checkpoints/. Prints where the checkpoint went, then the checkpoint.

    Example: countersign ledger checkpoint build/demo-ledger --key keys/ledger.key
    """
    from ledger.proof.checkpoint import CheckpointError, write_new, load_signing_key, make_checkpoint, save_checkpoint
    from ledger.store.log import LedgerError

    try:
        signing_key = load_signing_key(key)
        cp, note = make_checkpoint(directory, signing_key)
        if out is not None:
            target = Path(out)
            write_new(target, note, 0o644)
        else:
            target = save_checkpoint(directory, cp, note)
    except CheckpointError as exc:
        _fail(exc)
    except LedgerError as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"cannot write {exc.filename or directory}: {exc.strerror or exc}", EXIT_USAGE)
    typer.echo(f"wrote {target}")
    typer.echo(note.decode("utf-8"), nl=False)


def prove(
    directory: str = typer.Argument(..., help="The ledger directory."),
    seq: int = typer.Argument(..., help="The seq of the event to prove."),
    checkpoint_file: Optional[str] = typer.Option(
        None, "--checkpoint", help="Prove against this checkpoint's tree (default: the ledger's whole tree now)."
    ),
    out: Optional[str] = typer.Option(None, "--out", help="Write the proof here (default: standard output)."),
) -> None:
    """Write an inclusion proof (JSON) that the event SEQ is in the ledger's tree.

    With --checkpoint the tree is the checkpoint's (and the ledger must match it); `verify-proof`
    then checks the proof with nothing but the proof, that checkpoint and the public key.

    Example: countersign ledger prove build/demo-ledger 5 --checkpoint cp.checkpoint --out 5.proof
    """
    from ledger.proof.checkpoint import CheckpointError, write_new, make_proof, read_checkpoint
    from ledger.store.log import LedgerError

    try:
        cp = read_checkpoint(checkpoint_file, None) if checkpoint_file is not None else None
        proof = make_proof(directory, seq, cp)
        data = proof.encode()
        if out is not None:
            write_new(Path(out), data, 0o644)
    except CheckpointError as exc:
        _fail(exc)
    except LedgerError as exc:
        fail(str(exc), EXIT_USAGE)
    if out is None:
        typer.echo(data.decode("utf-8"), nl=False)
    else:
        typer.echo(f"wrote {out}: seq {seq} in a tree of {proof.tree_size} events")
    if cp is None:
        typer.echo(
            f"note: the proof is for the ledger's tree of {proof.tree_size} events; verify it against a checkpoint "
            "of that size",
            err=True,
        )


def verify_proof(
    proof: str = typer.Argument(..., help="The proof file (from `ledger prove`)."),
    checkpoint_file: str = typer.Option(..., "--checkpoint", help="The signed checkpoint the proof is for."),
    pubkey: str = typer.Option(..., "--pubkey", help="The public key the checkpoint must be signed with."),
    as_json: bool = typer.Option(False, "--json", help="Print the proven event as JSON."),
) -> None:
    """Check an inclusion proof offline: with nothing but the proof, the checkpoint and the key.

    Exit 0: the event is in the signed tree. Exit 1: it is not (or the signature fails).
    Exit 2: a file is missing or malformed.

    Example: countersign verify-proof 5.proof --checkpoint cp.checkpoint --pubkey keys/ledger.pub
    """
    from ledger.proof.checkpoint import MAX_PROOF_BYTES, CheckpointError, read_file, load_public_key
    from ledger.proof.checkpoint import verify_proof as run_verify_proof

    try:
        key = load_public_key(pubkey)
        note = read_file(checkpoint_file, "the checkpoint")
        data = read_file(proof, "the proof", MAX_PROOF_BYTES)
        try:
            proven = run_verify_proof(data, note, key)
        except CheckpointError as exc:
            raise type(exc)(f"{proof}: {exc}") from None
    except CheckpointError as exc:
        _fail(exc)
    event, cp = proven.record.event, proven.checkpoint
    kind = event.__struct_config__.tag
    if as_json:
        import msgspec

        echo_json(
            {
                "ok": True,
                "seq": proven.proof.seq,
                "hash": proven.record.hash,
                "event": msgspec.to_builtins(event),
                "data": proven.record.data_value(),
                "checkpoint": {"ledger_id": cp.ledger_id, "size": cp.size, "root": cp.root.hex(), "head": cp.head, "time": cp.time},
                "signed_by": f"{key.name}+{key.id.hex()}",
                "redactions": [msgspec.to_builtins(r) for r in proven.proof.redactions],
            }
        )
        return
    say(
        f"{proof}: verified: seq {proven.proof.seq} ({kind}, {event.ts}) is event {proven.proof.seq} of {cp.size} in "
        f"ledger {cp.ledger_id}"
    )
    say(f"  checkpoint signed by {key.name}+{key.id.hex()} at {cp.time}, root {cp.root.hex()}")
    if proven.proof.redactions:
        fields = ", ".join(r.path for r in proven.proof.redactions)
        say(f"  redacted (each a marker carrying the removed value's digest): {fields}")


def verify_with_checkpoint(
    directory: str,
    checkpoint_file: Optional[str],
    pubkey: Optional[str],
    from_checkpoint: bool,
    expect_head: Optional[str],
    as_json: bool,
    engine: str = "auto",
) -> None:
    """`ledger verify DIR --checkpoint FILE --pubkey KEY [--from-checkpoint] [--reference]`
    (`engine` is ledger.proof.verify.verify's; --from-checkpoint is always the reference's)."""
    from ledger.proof.checkpoint import CheckpointError, load_public_key, read_checkpoint, verify_against_checkpoint
    from ledger.store.log import LedgerError

    if checkpoint_file is None or pubkey is None:
        fail("--checkpoint and --pubkey go together (and --from-checkpoint needs both)", EXIT_USAGE)
    try:
        key = load_public_key(pubkey)
        cp = read_checkpoint(checkpoint_file, key)
        report, check = verify_against_checkpoint(directory, cp, expect_head=expect_head, incremental=from_checkpoint, engine=engine)
    except CheckpointError as exc:
        _fail(exc)
    except LedgerError as exc:  # the ledger changed under the second pass (removed, cut short)
        fail(str(exc), EXIT_USAGE)
    if as_json:
        import msgspec

        echo_json({**msgspec.to_builtins(report), **check.to_dict(), "ok": report.ok, "exit_code": report.exit_code})
        raise typer.Exit(report.exit_code)
    if report.unreadable is not None:
        fail(report.unreadable, EXIT_USAGE)
    for warning in report.warnings:
        say(f"warning: {warning}", err=True)
    p = report.problem
    if p is not None:
        where = f" at seq {p.seq}" if p.seq is not None else (" at head" if p.kind == "head" else "")
        code = f" [{p.code}]" if p.code else ""
        say(f"{directory}: FAILED{where}: {p.kind}{code}: {p.message}")
        if p.kind == "checkpoint":  # the chain itself held; it is not the ledger the checkpoint signed
            say("  the checkpoint does not vouch for this ledger")
        else:
            say(verified_before(report))
        raise typer.Exit(EXIT_FAIL)
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(report.statuses.items()))
    say(f"{directory}: intact: {report.count} events, head {report.head}")
    if statuses:
        say(f"  requests: {statuses}")
    mode = "incrementally, from" if from_checkpoint else "and extends"
    say(
        f"  checkpoint: verified {mode} the checkpoint of {cp.size} events signed by {key.name}+{key.id.hex()} at "
        f"{cp.time} (consistency proof: {len(check.proof)} hashes; root now {check.root.hex()})"
    )
