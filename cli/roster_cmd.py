"""`countersign roster ...`: make API tokens and check roster files (ledger.proof.roster)."""

import typer

from cli.output import EXIT_FAIL, EXIT_USAGE, chosen_format, echo_json, emit, fail, format_option, say

app = typer.Typer(no_args_is_help=True, help="Make tokens for, and check, a roster of principals (TOML).")


@app.command()
def token(name: str = typer.Argument(..., help="The principal the token is for.")) -> None:
    """Print a fresh random API token once, and the line to paste into NAME's entry of the roster.

    The roster keeps only the token's SHA-256; the token itself is shown here and nowhere else.

    Example: countersign roster token alice
    """
    from ledger.proof.roster import new_token, token_hash

    if not name.strip() or any(ord(c) < 0x20 for c in name):
        fail("the name must be non-empty text on one line", EXIT_USAGE)
    secret = new_token()
    say(f"token for {name} (shown once; give it to {name} and keep no copy):")
    say(f"  {secret}")
    say(f"add to {name}'s [[principal]] entry of the roster:")
    say(f'  token_sha256 = ["{token_hash(secret)}"]')


@app.command()
def add(
    roster: str = typer.Argument(..., help="The roster file (TOML); created when missing."),
    name: str = typer.Argument(..., help="The principal's name: what the ledger records as proposer or decider."),
    kind: str = typer.Option(..., "--kind", help="agent, reviewer, admin or service."),
    group: list[str] = typer.Option([], "--group", help="A roster group (repeat for several)."),
    key: list[str] = typer.Option([], "--key", help="A verifier key file (`ledger keygen`'s .pub) to list."),
    make_token: bool = typer.Option(False, "--token", help="Make an API token: its hash goes into the roster, "
                                    "the token itself to standard output, once."),
) -> None:
    """Add a principal to a roster, with a fresh API token (--token) or keys (--key).

    With --token, standard output is the token alone (capture it: `> agent-7.token`); it is shown
    nowhere else. The roster is checked before it is written: a name, key or token listed twice
    is refused and the file is left as it was.

    Example: countersign roster add roster.toml agent-7 --kind agent --token > agent-7.token
    """
    from pathlib import Path

    from ledger.proof.keys import CheckpointError, load_public_key
    from ledger.proof.roster import KINDS, Principal, RosterError, add_principal, new_token, token_hash

    if kind not in KINDS:
        fail(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}", EXIT_USAGE)
    keys = []
    for path in key:
        try:
            keys.append(load_public_key(path))
        except (CheckpointError, OSError) as exc:
            fail(f"{path}: {exc}", EXIT_USAGE)
    secret = new_token() if make_token else None
    principal = Principal(name, kind, tuple(sorted(set(group))), (token_hash(secret),) if secret else (), tuple(keys))
    try:
        loaded = add_principal(Path(roster), principal)
    except RosterError as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"{roster}: {exc.strerror or exc}", EXIT_USAGE)
    typer.echo(f"{roster}: added {name} ({kind}); {len(loaded.principals)} principals, digest {loaded.digest}", err=True)
    if secret:
        typer.echo(secret)


@app.command()
def check(
    roster: str = typer.Argument(..., help="The roster file (TOML)."),
    fmt: str = format_option(what="; csv and jsonl write one principal a row"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: {ok, digest, principals} (--format json)."),
) -> None:
    """Check a roster file and print its principals and its digest (what the ledger records).

    Exit 0: a valid roster. Exit 1: not a valid roster (the message says where). csv and jsonl
    write one principal a row (name, kind, groups, keys, token_sha256; csv: lists as compact
    JSON), json one object {ok, digest, principals}; an invalid roster is {ok: false, error}.

    Example: countersign roster check roster.toml
    """
    from ledger.proof.roster import RosterError, load_roster

    fmt = chosen_format(fmt, as_json)
    as_json = fmt in ("json", "jsonl")
    try:
        loaded = load_roster(roster)
    except RosterError as exc:
        if as_json:
            echo_json({"ok": False, "error": str(exc)})
            raise typer.Exit(EXIT_FAIL)
        fail(str(exc), EXIT_FAIL)
    principals = sorted(loaded.principals.values(), key=lambda p: p.name)
    if fmt == "json":
        echo_json({"ok": True, "digest": loaded.digest, "principals": [p.canonical() for p in principals]})
        return
    if fmt != "table":
        fields = ("name", "kind", "groups", "keys", "token_sha256")
        emit(list(fields), [[p.canonical().get(f) for f in fields] for p in principals], fmt)
        return
    say(f"{roster}: a valid roster of {len(principals)} principal{'s' if len(principals) != 1 else ''}, digest {loaded.digest}")
    for p in principals:
        groups = f" groups {', '.join(p.groups)}" if p.groups else ""
        say(f"  {p.name} ({p.kind}){groups}: {len(p.keys)} key(s), {len(p.token_sha256)} token(s)")
