"""`countersign roster ...`: make API tokens and check roster files (ledger.proof.roster)."""

import typer

from cli.output import EXIT_FAIL, EXIT_USAGE, echo_json, fail, say

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
def check(
    roster: str = typer.Argument(..., help="The roster file (TOML)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check a roster file and print its principals and its digest (what the ledger records).

    Exit 0: a valid roster. Exit 1: not a valid roster (the message says where).

    Example: countersign roster check roster.toml
    """
    from ledger.proof.roster import RosterError, load_roster

    try:
        loaded = load_roster(roster)
    except RosterError as exc:
        if as_json:
            echo_json({"ok": False, "error": str(exc)})
            raise typer.Exit(EXIT_FAIL)
        fail(str(exc), EXIT_FAIL)
    principals = sorted(loaded.principals.values(), key=lambda p: p.name)
    if as_json:
        echo_json({"ok": True, "digest": loaded.digest, "principals": [p.canonical() for p in principals]})
        return
    say(f"{roster}: a valid roster of {len(principals)} principal{'s' if len(principals) != 1 else ''}, digest {loaded.digest}")
    for p in principals:
        groups = f" groups {', '.join(p.groups)}" if p.groups else ""
        say(f"  {p.name} ({p.kind}){groups}: {len(p.keys)} key(s), {len(p.token_sha256)} token(s)")
