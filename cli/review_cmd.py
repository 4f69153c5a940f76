"""`countersign review ...`: the queue of requests waiting for a person, from the command line.

Every command opens the ledger as one more Gate (ledger.workflow.gate: a projection that catches up), so it
works while agents' Gates are open on the same ledger, in other processes. The reviewer is the
operating-system account running the command (its login name, from the effective uid), never a
flag or a value from the request: identities come from authentication.
"""

from __future__ import annotations

import functools
import os
from typing import Any, List, Optional

import typer

from cli.output import EXIT_FAIL, EXIT_USAGE, chosen_format, columns, echo_json, emit, fail, format_option, say

app = typer.Typer(no_args_is_help=True, help="List, inspect and answer the requests waiting for a person.")

LEDGER_ENV = "COUNTERSIGN_LEDGER"
EXIT_WAITING = 3  # `review wait`: the timeout passed and the request still waits
TABLE_ROWS = 50  # `review list` shows the oldest this many unless told otherwise: a queue is read from its head
# The fields of a queue row (ledger.workflow.describe.brief): the header of `list --format csv`.
BRIEF_FIELDS = ("request", "tool", "run", "proposer", "call_id", "status", "effect", "args_digest", "reasons", "rules",
                "proposed_at", "deadline", "quorum", "decisions", "args")
MAY_RUN = frozenset({"allowed", "approved", "executing", "executed"})

_LEDGER = typer.Option(None, "--ledger", "-l", envvar=LEDGER_ENV, help=f"The ledger directory (or ${LEDGER_ENV}).")
_DIGEST = typer.Option(None, "--digest", help="The argument digest `review show` printed: the command refuses if the arguments changed since.")
_JSON = typer.Option(False, "--json", help="Print JSON.")
_AS = typer.Option(None, "--as", hidden=True)
_KEY = typer.Option(None, "--key", help="Sign the decision with this private key (`ledger keygen`'s .key file); "
                    "`ledger verify --roster` checks it against your name's keys.")
_ROSTER = typer.Option(None, "--roster", help="Record this roster's digest in the ledger first (when it is not the last "
                       "one recorded): the roster `ledger verify --roster` checks the decisions after it against.")


def reviewer() -> str:
    """The login name of the effective uid running this process (the OS account). Raises
    typer.Exit (2) when the account has no name."""
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        fail(f"the account running this command (uid {os.geteuid()}) has no login name to record as the reviewer")


def _refuse_as(name: Optional[str]) -> None:
    if name is not None:
        fail("--as is refused: the reviewer is the operating-system account running the command "
             f"({reviewer()}); deciding as someone else needs a signing key, which this command does not take yet")


def _fail(message: str, code: int = EXIT_USAGE, *, as_json: bool = False, error: str = "usage") -> None:
    """`fail`, or with --json the same as a JSON object on stdout (`error`: a stable name)."""
    if as_json:
        echo_json({"error": error, "message": message})
        raise typer.Exit(code)
    fail(message, code)


def _open(ledger: Optional[str], policy: Optional[str] = None, *, as_json: bool = False, roster: Optional[str] = None):
    """A Gate on an existing ledger (exit 2 with the reason when it cannot be opened); `policy`
    loaded with `roster`'s groups (a policy may name them) when both are given."""
    from ledger.store.log import Ledger, LedgerError
    from ledger.workflow.gate import Gate

    if not ledger:
        _fail(f"no ledger: pass --ledger DIR or set {LEDGER_ENV}", as_json=as_json, error="no-ledger")
    loaded = None
    if policy is not None:
        from cli.output import load_policy

        loaded = load_policy(policy, roster)
    try:
        return Gate(loaded, Ledger(ledger, create=False))
    except LedgerError as exc:
        corrupt = type(exc).__name__ == "LedgerCorrupt"
        _fail(str(exc), EXIT_FAIL if corrupt else EXIT_USAGE, as_json=as_json, error="ledger-corrupt" if corrupt else "ledger")
    except PermissionError as exc:
        _fail(f"{exc.filename or ledger}: permission denied: a reviewer needs to read and write the ledger's directory and "
              "files (README, \"Deploying\": a group the agent's account is not in)", as_json=as_json, error="permission")
    except OSError as exc:
        _fail(f"{exc.filename or ledger}: {exc.strerror or exc}", as_json=as_json, error="ledger")


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


@functools.lru_cache(maxsize=4096)
def _moment(ts: str):
    from ledger.clock import parse_ts

    return parse_ts(ts)  # a queue's requests share few deadlines (those asked in the same second)


def _left(deadline: Optional[str], now=None) -> str:
    """Time left before `deadline` as `1h02m`, `4m10s`, `12s`, or `expired`."""
    if deadline is None:
        return "-"
    seconds = int((_moment(deadline) - (now or _now())).total_seconds())
    if seconds <= 0:
        return "expired"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _summary(args: Any, width: int = 48) -> str:
    """The arguments as one line of compact JSON, cut to `width` characters."""
    import msgspec

    text = msgspec.json.encode(args).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command("list")
def list_requests(
    ledger: Optional[str] = _LEDGER,
    tool: Optional[str] = typer.Option(None, "--tool", help="Only requests for this tool."),
    run: Optional[str] = typer.Option(None, "--run", help="Only requests of this run."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1,
                                        help="At most this many, oldest first (default: 50 in the table, all in the other formats or with -q)."),
    show_all: bool = typer.Option(False, "--all", help="Every waiting request in the table."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the ids, one a line (for scripts)."),
    fmt: str = format_option(what="; csv, json and jsonl write every field of each request"),
    as_json: bool = _JSON,
) -> None:
    """The pending requests, oldest first: id, tool, arguments in brief, quorum progress, time left.

    Catches up with the ledger first and expires what is due (silence rejects). A request's id is
    the seq of the event that proposed it. csv, json and jsonl write one record a request:
    request, tool, run, proposer, call_id, status, effect, args_digest, reasons, rules,
    proposed_at, deadline, quorum, decisions, args (csv: lists and objects as compact JSON).

    Example: countersign review list --ledger build/ledger
    """
    from ledger.workflow import describe

    fmt = chosen_format(fmt, as_json)
    as_json = fmt in ("json", "jsonl")  # then an error is a JSON object on stdout too
    if limit is None and not (show_all or quiet or fmt != "table"):
        limit = TABLE_ROWS
    with _open(ledger, as_json=as_json) as gate:
        rows = gate.pending(limit=limit, tool=tool, run=run)
        waiting = gate.pending_count() if tool is None and run is None else None
        arguments = {} if quiet else gate.arguments_of(rows, checked=False)  # a summary; `show` checks what it shows
    if quiet:
        for s in rows:
            typer.echo(str(s.request))
        return
    if fmt != "table":
        briefs = [describe.brief(None, s, args=arguments.get(s.request)) for s in rows]
        names = list(briefs[0]) if briefs else list(BRIEF_FIELDS)
        emit(names, [[b[k] for k in names] for b in briefs], fmt)
        return
    if not rows:
        say("no requests are waiting for a decision")
        return
    now = _now()
    more = f", the oldest {len(rows)} shown (--all for every one)" if waiting is not None and waiting > len(rows) else ""
    say(f"{waiting if waiting is not None else len(rows)} waiting{more}; `countersign review show ID` for one in full")
    columns(["id", "tool", "arguments", "approvals", "left"],
            [[s.request, s.tool, _summary(arguments.get(s.request), 34), _progress(describe.quorum(s)), _left(s.deadline, now)]
             for s in rows],
            [8, 20, 34, 9, 7])


def _progress(quorum: dict) -> str:
    got = len(quorum["approved_by"])
    return f"{got}/{got + quorum['more_needed']}"


@app.command()
def show(
    request: int = typer.Argument(..., help="The request id."),
    ledger: Optional[str] = _LEDGER,
    digest_only: bool = typer.Option(False, "--digest-only", help="Print only the argument digest (for `--digest`)."),
    as_json: bool = _JSON,
) -> None:
    """One request in full: its exact arguments (checked against their digest while it can run),
    the digest to approve, what an edit changed, the rules that decided it and where they are,
    the run's earlier calls, and every event of its history.

    Example: countersign review show 7 --ledger build/ledger
    """
    from ledger.workflow import describe

    from ledger.workflow.machine import UnknownRequest

    with _open(ledger, as_json=as_json) as gate:
        try:
            state = gate.get(request)
        except UnknownRequest as exc:
            _fail(exc.message, as_json=as_json, error=exc.code)
        if digest_only:
            typer.echo(state.digest)
            return
        item = describe.in_full(gate, request)
    if as_json:
        echo_json(item)
        return
    _print_request(item)


def _print_request(item: dict) -> None:
    """`review show` for a person: short lines, every value with its controls escaped."""
    import msgspec

    def pretty(value) -> list[str]:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode().splitlines()

    say(f"request {item['request']}: {item['tool']} ({item['status']})")
    say(f"  proposed by {item['proposer']} at {item['proposed_at']}" + (f", run {item['run']}" if item["run"] else ""))
    for reason in item["reasons"]:
        say(f"  reason: {reason}")
    for rule in item["rules_at"]:
        when = "" if rule["seq"] == item["request"] else f" (the edit at seq {rule['seq']})"
        say(f"  rule: {rule['rule']}" + (f" ({rule['at']})" if rule["at"] else "") + when)
    q = item["quorum"]
    waiting = item["status"] in ("pending", "interrupting")
    if q["needs"] and waiting:
        say(f"  needs: {q['needs']}")
        say(f"  approved by: {', '.join(q['approved_by']) or 'no one yet'}; {q['more_needed']} more")
    elif q["approved_by"]:
        say(f"  approved by: {', '.join(q['approved_by'])}")
    if item["deadline"] and waiting:
        left = _left(item["deadline"])
        say(f"  deadline: {item['deadline']} ({left} left)" if left != "expired" else f"  deadline: {item['deadline']} (passed)")
    if item["decisions"]:
        say(f"  decisions allowed: {', '.join(item['decisions'])}")
    if item["decided_by"] or item["reason"]:
        say(f"  decided: {item['decision'] or item['status']}" + (f" by {item['decided_by']}" if item["decided_by"] else "")
            + (f" at {item['decided_at']}" if item["decided_at"] else ""))
        if item["reason"]:
            say(f"  said: {item['reason']}")
    say(f"  digest: {item['args_digest']}")
    if item["args"] is not None:
        say("  arguments:" if waiting or item["status"] in ("approved", "allowed") else "  arguments (as stored):")
        for line in pretty(item["args"]):
            say(f"    {line}")
    if item["original_args"] is not None and item["args"] is not None:
        import difflib

        say(f"  edited {item['edits']} time{'s' if item['edits'] != 1 else ''}; changes against what the agent proposed:")
        for line in difflib.unified_diff(pretty(item["original_args"]), pretty(item["args"]), "proposed", "now", lineterm="", n=1):
            say(f"    {line}")
    if item["earlier_in_run"]:
        say(f"  earlier in run {item['run']} (newest first):")
        for e in item["earlier_in_run"]:
            say(f"    {e['request']:>6}  {e['tool']}  {e['status']}")
    say("  history:")
    for line in item["history"]:
        say(f"    {line['seq']:>6}  {line['ts']}  {line['text']}")


def _decided(state, as_json: bool) -> None:
    from ledger.workflow import describe

    if as_json:
        echo_json({"request": state.request, "status": state.status, "decided_by": state.decided_by,
                   "approved_by": list(state.approvals), "args_digest": state.digest})
        return
    extra = ""
    if state.status == "pending" and state.requirements is not None:
        extra = f" ({_progress(describe.quorum(state))} approvals)"
    say(f"request {state.request}: {state.status}{extra}")


def _signing(key: Optional[str], as_json: bool):
    """The Signing of `--key FILE` (None without one); exit 2 when the file is not a private key."""
    if key is None:
        return None
    from ledger.proof.decisions import Signing
    from ledger.proof.keys import CheckpointError, load_signing_key

    try:
        return Signing(load_signing_key(key), "reviewer")
    except CheckpointError as exc:
        _fail(str(exc), as_json=as_json, error="key")


def _check_signer(signing, roster, as_json: bool) -> None:
    """Refuse, before anything is written, a key the roster does not give to the account running
    the command as a reviewer (`ledger verify --roster` would report the decision); without a
    roster, warn when the key's name is not the account's. Exit 2."""
    if signing is None:
        return
    me, public = reviewer(), signing.key.public
    if roster is None:
        if public.name != me:
            say(f"warning: the key is named {public.name!r} and you are {me!r}: `ledger verify --roster` accepts "
                f"the decision only if the roster gives this key to {me}", err=True)
        return
    found = roster.key(public.name, public.id.hex())
    if found is None:
        _fail(f"{roster.source} gives the key {public.name}+{public.id.hex()} to no one: add its public key (the "
              f".pub file's line) to {me}'s `keys`", as_json=as_json, error="key")
    elif found[0].name != me or found[0].kind != "reviewer":
        _fail(f"{roster.source} gives this key to {found[0].name} ({found[0].kind}); you are {me}: a decision is "
              "signed with the decider's own key, as a reviewer", as_json=as_json, error="key")


def _step(ledger: Optional[str], fn, *, policy: Optional[str] = None, as_json: bool = False, key: Optional[str] = None,
          roster: Optional[str] = None) -> None:
    """Run one decision on a fresh Gate, signed with `key` when given (`fn(gate, signing)`), after
    recording `roster`. A refusal is exit 1 with its rule's code and message; a request that does
    not exist, or an edit with another policy than the call's, exit 2."""
    from ledger.workflow.gate import GateError, PolicyMismatch
    from ledger.workflow.machine import UnknownRequest, Violation

    signing = _signing(key, as_json)
    loaded_roster = None
    if roster is not None:
        from ledger.proof.roster import RosterError, load_roster

        try:
            loaded_roster = load_roster(roster)
        except RosterError as exc:
            _fail(str(exc), as_json=as_json, error="roster")
    _check_signer(signing, loaded_roster, as_json)
    with _open(ledger, policy, as_json=as_json, roster=roster) as gate:
        try:
            if loaded_roster is not None:
                gate.record_roster(loaded_roster, reviewer())
            if signing is None and gate.workflow.roster is not None:
                say("warning: this decision is not signed, and the ledger records a roster (its decisions are signed): "
                    "`ledger verify --roster` will report it; decide with --key", err=True)
            state = fn(gate, signing)
        except UnknownRequest as exc:
            _fail(exc.message, as_json=as_json, error=exc.code)
        except Violation as exc:
            if as_json:
                echo_json({"error": exc.code, "message": exc.message, "request": exc.request})
                raise typer.Exit(EXIT_FAIL)
            fail(f"refused ({exc.code}): {exc.message}", EXIT_FAIL)
        except PolicyMismatch as exc:
            _fail(f"request {exc.request} was decided by another policy than {policy}: an edit re-enters the policy "
                  "that decided the call, so give --policy the file the agent's Gate loaded", as_json=as_json,
                  error="policy-mismatch")
        except GateError as exc:
            _fail(str(exc), as_json=as_json, error="refused")
    _decided(state, as_json)


def _need_digest(digest: Optional[str]) -> str:
    """Every decision names the arguments it was made on: a decision on arguments that changed
    after the reviewer looked is refused (stale-digest). A digest is 64 lowercase hex digits."""
    if not digest:
        fail("name the argument digest you decided on: --digest (printed by `countersign review show REQ`)")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        fail(f"--digest {digest!r} is not a digest: 64 lowercase hex digits, as `countersign review show REQ --digest-only` "
             "prints it (a shortened one is not accepted)")
    return digest


_REMEMBER = typer.Option(None, "--remember", help="Make the decision standing: run, session or a duration such as 8h, "
                         "as far as the rule's `remember` clause allows (docs/policy-language.md, Remembered decisions).")
_EXACT = typer.Option(False, "--exact", help="With --remember: only for calls with exactly these arguments.")


@app.command()
def approve(
    request: int = typer.Argument(..., help="The request id."),
    digest: Optional[str] = _DIGEST,
    comment: Optional[str] = typer.Option(None, "--comment", help="A note kept with the approval."),
    remember: Optional[str] = _REMEMBER,
    exact: bool = _EXACT,
    ledger: Optional[str] = _LEDGER,
    key: Optional[str] = _KEY,
    roster: Optional[str] = _ROSTER,
    as_name: Optional[str] = _AS,
    as_json: bool = _JSON,
) -> None:
    """Approve the arguments whose digest you saw (--digest is required).

    Example: countersign review approve 7 --digest 3f1c... --ledger build/ledger
    """
    _refuse_as(as_name)
    digest = _need_digest(digest)
    _step(ledger, lambda g, s: g.approve(request, approver=reviewer(), digest=digest, comment=comment, signing=s,
                                         remember=remember, pattern="exact" if exact else None),
          as_json=as_json, key=key, roster=roster)


@app.command()
def reject(
    request: int = typer.Argument(..., help="The request id."),
    reason: str = typer.Option(..., "--reason", help="What the agent should do instead: it is told this."),
    digest: Optional[str] = _DIGEST,
    remember: Optional[str] = _REMEMBER,
    exact: bool = _EXACT,
    ledger: Optional[str] = _LEDGER,
    key: Optional[str] = _KEY,
    roster: Optional[str] = _ROSTER,
    as_name: Optional[str] = _AS,
    as_json: bool = _JSON,
) -> None:
    """Reject the call; the reason goes back to the agent as an instruction.

    Example: countersign review reject 7 --digest 3f1c... --reason "refund at most 50 EUR without a receipt"
    """
    _refuse_as(as_name)
    digest = _need_digest(digest)
    _step(ledger, lambda g, s: g.reject(request, approver=reviewer(), reason=reason, digest=digest, signing=s,
                                        remember=remember, pattern="exact" if exact else None),
          as_json=as_json, key=key, roster=roster)


@app.command()
def respond(
    request: int = typer.Argument(..., help="The request id."),
    message: str = typer.Option(..., "--message", help="The answer the agent gets in place of the tool's result."),
    digest: Optional[str] = _DIGEST,
    ledger: Optional[str] = _LEDGER,
    key: Optional[str] = _KEY,
    roster: Optional[str] = _ROSTER,
    as_name: Optional[str] = _AS,
    as_json: bool = _JSON,
) -> None:
    """Answer in place of the tool: the call does not run; the agent gets the message."""
    _refuse_as(as_name)
    digest = _need_digest(digest)
    _step(ledger, lambda g, s: g.respond(request, approver=reviewer(), message=message, digest=digest, signing=s),
          as_json=as_json, key=key, roster=roster)


@app.command()
def cancel(
    request: int = typer.Argument(..., help="The request id."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why it was withdrawn."),
    digest: Optional[str] = _DIGEST,
    ledger: Optional[str] = _LEDGER,
    key: Optional[str] = _KEY,
    roster: Optional[str] = _ROSTER,
    as_name: Optional[str] = _AS,
    as_json: bool = _JSON,
) -> None:
    """Withdraw a call that has not started running."""
    _refuse_as(as_name)
    digest = _need_digest(digest)
    _step(ledger, lambda g, s: g.cancel(request, by=reviewer(), reason=reason, digest=digest, signing=s),
          as_json=as_json, key=key, roster=roster)


@app.command()
def edit(
    request: int = typer.Argument(..., help="The request id."),
    policy: str = typer.Option(..., "--policy", "-p", help="The policy the edited call re-enters (the one the agent's Gate uses)."),
    args: Optional[str] = typer.Option(None, "--args", help="The new arguments, a JSON object."),
    sets: List[str] = typer.Option([], "--set", help="path=value (value as JSON, else text); repeatable. Applied to the current arguments."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why the arguments were changed."),
    digest: Optional[str] = _DIGEST,
    ledger: Optional[str] = _LEDGER,
    key: Optional[str] = _KEY,
    roster: Optional[str] = _ROSTER,
    as_name: Optional[str] = _AS,
    as_json: bool = _JSON,
) -> None:
    """Replace the arguments (the edit counts as your approval of the new ones; the policy decides again).

    Example: countersign review edit 7 -p samples/retail.policy --set amount=20 --digest 3f1c...
    """
    import msgspec

    _refuse_as(as_name)
    digest = _need_digest(digest)
    if args is not None and sets:
        fail("give the new arguments with --args JSON or with --set path=value, not both")
    if args is None and not sets:
        fail("give the new arguments with --args JSON or one or more --set path=value")

    def run(gate, signing):
        if args is not None:
            try:
                new = msgspec.json.decode(args)
            except msgspec.DecodeError as exc:
                fail(f"--args is not JSON: {exc}")
        else:
            new = _apply_sets(gate.arguments(request), sets)
        if not isinstance(new, dict):
            fail("the arguments must be a JSON object")
        return gate.edit(request, editor=reviewer(), args=new, reason=reason, digest=digest, signing=signing)

    _step(ledger, run, policy=policy, as_json=as_json, key=key, roster=roster)


def _apply_sets(current: dict, sets: List[str]) -> dict:
    """`current` with each `a.b.0=value` applied (value read as JSON, else as text)."""
    import msgspec

    out = current
    for item in sets:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            fail(f"--set {item!r}: expected path=value")
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            if raw[:1] in ('"', "[", "{"):  # meant as JSON, mistyped: not silently text
                fail(f"--set {item!r}: the value starts like JSON but is not JSON; quote text that should stay text")
            value = raw
        *parents, last = path.split(".")
        node: Any = out
        for part in parents:
            if isinstance(node, list):
                try:
                    node = node[int(part)]
                except (ValueError, IndexError):
                    fail(f"--set {item!r}: {part} is not an index of the list")
            else:
                node = node.setdefault(part, {})
            if not isinstance(node, (dict, list)):
                fail(f"--set {item!r}: {part} is not an object or a list")
        if isinstance(node, list):
            try:
                node[int(last)] = value
            except (ValueError, IndexError):
                fail(f"--set {item!r}: {last} is not an index of the list")
        else:
            node[last] = value
    return out


@app.command()
def wait(
    request: int = typer.Argument(..., help="The request id."),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="Give up after this long (30s, 5m, 1h); default: until decided."),
    ledger: Optional[str] = _LEDGER,
    as_json: bool = _JSON,
) -> None:
    """Wait until the request is decided, expired or cancelled.

    Exit 0: the call may run (approved or allowed). Exit 1: it will not (rejected, responded,
    expired, cancelled, denied). Exit 3: still waiting when --timeout passed.
    """
    from ledger.workflow.machine import UnknownRequest

    seconds = _duration(timeout) if timeout is not None else None
    with _open(ledger, as_json=as_json) as gate:
        try:
            state = gate.wait(request, timeout=seconds)
        except UnknownRequest as exc:
            _fail(exc.message, as_json=as_json, error=exc.code)
    code = EXIT_WAITING if state.status in ("pending", "interrupting") else 0 if state.status in MAY_RUN else EXIT_FAIL
    if as_json:
        echo_json({"request": state.request, "status": state.status, "decision": state.decision,
                   "decided_by": state.decided_by, "reason": state.reason, "exit_code": code})
    else:
        say(f"request {state.request}: {state.status}{_who_decided(state)}" + (f": {state.reason}" if state.reason else ""))
    raise typer.Exit(code)


def _who_decided(state) -> str:
    """` (approved by alice)`, ` (rejected by bob)`, ` (expired)`: the decision, not the status."""
    verb = {"approve": "approved", "reject": "rejected", "respond": "answered", "cancel": "cancelled",
            "expire": "expired", "deny": "denied by the policy"}.get(state.decision or "")
    if verb is None or verb == state.status:
        return f" (by {state.decided_by})" if state.decided_by and verb != state.status else ""
    return f" ({verb} by {state.decided_by})" if state.decided_by else f" ({verb})"


def _duration(text: str) -> float:
    """`30`, `30s`, `5m`, `1h` in seconds (exit 2 otherwise)."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        value = float(number) * unit
    except ValueError:
        fail(f"--timeout {text!r}: expected a duration such as 30s, 5m or 1h")
    if not value >= 0 or value == float("inf"):
        fail(f"--timeout {text!r}: expected a duration such as 30s, 5m or 1h")
    return value


@app.command()
def expire(ledger: Optional[str] = _LEDGER, as_json: bool = _JSON) -> None:
    """Expire every request whose deadline has passed (for cron; every other command does it too)."""
    with _open(ledger, as_json=as_json) as gate:
        expired = gate.expire()
    if as_json:
        echo_json({"expired": expired})
    else:
        say(f"expired {len(expired)} request{'s' if len(expired) != 1 else ''}" + (f": {', '.join(map(str, expired))}" if expired else ""))
