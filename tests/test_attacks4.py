"""A fourth hostile review: texts bash 5.2 (and GNU env 9.1, git 2.39) run `rm` with while the
policy `default allow` + `deny Bash when any c in shell(args.command): c.program == "rm"` allows
them, and inputs within the documented limits that take far longer to decide than their size
should. Each finding was checked with bash itself, PATH leading to a directory whose only `rm`
is a script recording that it ran (`bash_runs_rm`). Each test is xfail (strict) until fixed.

In every text below no command shell() lists is `dynamic`, so even a deny on `c.dynamic` lets it
through: the code that runs is in the text, where shell() does not look.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from dsl import Policy
from dsl.compiler import clear_caches

NO_RM = Policy.from_text("""
default allow
deny Bash when any c in shell(args.command): c.program == "rm" or c.dynamic reason "no rm"
""", "attacks4.policy")


def decide(command: str) -> str:
    return NO_RM.evaluate("Bash", {"command": command}, {"cwd": "/home/u/proj"}).effect


_BASH = shutil.which("bash")
_SETPRIV = shutil.which("setpriv")
needs_bash = pytest.mark.skipif(_BASH is None, reason="bash is not installed")


def bash_runs_rm(command: str, tools: tuple[str, ...] = ()) -> bool:
    """Whether `bash -c command` runs `rm` (a harmless script recording it ran), with PATH holding
    only it, bash, echo and `tools` (links to the real ones). As root bash ignores PS4 from the environment,
    so the text runs as nobody there (setpriv)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)
        bin_dir, log = os.path.join(tmp, "bin"), os.path.join(tmp, "ran")
        os.mkdir(bin_dir)
        with open(os.path.join(bin_dir, "rm"), "w") as f:
            f.write(f"#!/bin/sh\necho \"$@\" >> {log}\n")
        os.chmod(os.path.join(bin_dir, "rm"), 0o755)
        for tool in dict.fromkeys(("bash", "echo", *tools)):  # nested shells find bash on PATH
            real = shutil.which(tool)
            if real is None:
                pytest.skip(f"{tool} is not installed")
            os.symlink(real, os.path.join(bin_dir, tool))
        argv = [_BASH, "-c", command]
        if os.geteuid() == 0:
            if _SETPRIV is None:
                pytest.skip("running as root without setpriv")
            argv = [_SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        subprocess.run(["/usr/bin/env", "-i", f"PATH={bin_dir}", f"HOME={tmp}", *argv], cwd=tmp,
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
        return os.path.exists(log)


# --- 1. variables a nested bash runs as code --------------------------------------------------
# bash(1): PS4 is expanded (command substitution included) before each traced command (-x, or
# SHELLOPTS=xtrace in the environment); PS0 and PROMPT_COMMAND run in an interactive shell;
# BASH_ENV names a file a non-interactive bash sources first; `BASH_FUNC_NAME%%=() {...}` in the
# environment defines the function NAME (bash's exported functions). shell() reads the nested
# bash's -c script or here-string, but not the code its environment hands it.
ENVIRONMENT_CODE = [
    ("PS4='$(rm x)' bash -xc :", ()),
    ("env SHELLOPTS=xtrace PS4='$(rm x)' bash -c :", ("env",)),
    ("timeout 5 env PS4='$(rm x)' bash -xc :", ("env", "timeout")),
    ("PS4='$(rm x)' bash -x <<< ':'", ()),
    ("PS0='$(rm x)' bash -i <<< 'echo'", ("echo",)),
    ("env PROMPT_COMMAND='rm x' bash -i <<< 'echo'", ("env", "echo")),
    ("BASH_ENV=/dev/stdin bash -c : <<< 'rm x'", ()),
    ("echo 'rm x' > f; BASH_ENV=f bash -c :", ()),
    ("env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls", ("env",)),
    ("env 'BASH_FUNC_command_not_found_handle%%=() { rm x; }' bash -c nosuch", ("env",)),
]


@needs_bash
@pytest.mark.parametrize("command,tools", ENVIRONMENT_CODE)
def test_bash_runs_the_code_its_environment_holds(command, tools):
    assert bash_runs_rm(command, tools), command


@pytest.mark.parametrize("command", [c for c, _ in ENVIRONMENT_CODE])
def test_code_in_a_shell_s_environment_is_not_allowed(command):
    assert decide(command) != "allow", command


# --- 2. history: fc runs what `history -s` put there, or an editor ---------------------------
# bash(1), SHELL BUILTIN COMMANDS: `history -s ARGS` adds ARGS to the history list (also in
# `bash -c`), `fc -s` (and `fc -e -`) runs a history entry again, and `fc [-e ENAME]` runs the
# editor ENAME (else FCEDIT, else EDITOR) on the entries, then runs what it leaves.
HISTORY = [
    "history -s 'rm x'; fc -s",
    "history -s 'rm x'\nfc -s -1",
    "history -s 'rm x'; fc -e -",
    "history -s ls; fc -e rm",
    "history -s ls; FCEDIT=rm fc",
    "history -s ls; EDITOR=rm fc",
    "bash -ic 'history -s \"rm x\"; fc -s'",
    # history expansion in a shell that reads its input interactively (-i) or with -H -o history
    "bash -i <<< $'history -s \"rm x\"\\n!!'",
    "bash -i <<< $'history -s \"rm y\"\\n^y^x'",
    "bash -H -o history <<< $'history -s \"rm x\"\\n!!'",
]


@needs_bash
@pytest.mark.parametrize("command", HISTORY)
def test_bash_runs_the_history_again(command):
    assert bash_runs_rm(command, ("bash",)), command


@pytest.mark.parametrize("command", HISTORY)
def test_what_fc_runs_is_not_allowed(command):
    assert decide(command) != "allow", command


# --- 3. compgen -W expands its word list ------------------------------------------------------
# bash(1), Programmable Completion: the -W wordlist "is split using the characters in IFS ...
# and each resultant word is expanded": parameter, command and arithmetic substitution run.
COMPGEN = ["compgen -W '$(rm x)' a", "compgen -W '`rm x`'", "compgen -W '${x:-$(rm x)}' a"]


@needs_bash
@pytest.mark.parametrize("command", COMPGEN)
def test_bash_expands_compgen_s_word_list(command):
    assert bash_runs_rm(command), command


@pytest.mark.parametrize("command", COMPGEN)
def test_a_substitution_in_compgen_s_word_list_is_listed(command):
    assert decide(command) != "allow", command


# --- 4. env -S is read by shlex, not as GNU env splits it -------------------------------------
# GNU coreutils 9.1 env(1), -S: `\c` ignores the rest of the string, and a `#` at the start of a
# word starts a comment. shlex reads `\c` as `c` and `#` as a word: shell() lists `rmc`, `#c`.
ENV_SPLIT = ["env -S 'rm\\c' x", "env -S 'rm\\cjunk' x", "env -S '#c' rm x", "env -S\"rm\\c\" x", "env -vS'rm\\c' x"]


@needs_bash
@pytest.mark.parametrize("command", ENV_SPLIT)
def test_gnu_env_splits_its_string_so(command):
    assert bash_runs_rm(command, ("env",)), command


@pytest.mark.parametrize("command", ENV_SPLIT)
def test_env_s_string_is_split_as_env_splits_it(command):
    assert decide(command) != "allow", command


# --- 5. git's ext:: transport, allowed by GIT_ALLOW_PROTOCOL ----------------------------------
# git(1) GIT_ALLOW_PROTOCOL: the listed protocols are allowed; git-remote-ext(1): `ext::CMD ARGS`
# runs CMD. The variable is not among those gitconfig.ENVIRONMENT makes `dynamic`.
GIT_EXT = ["GIT_ALLOW_PROTOCOL=ext git ls-remote 'ext::rm x'", "GIT_ALLOW_PROTOCOL=ext git clone 'ext::rm x' d"]


@needs_bash
@pytest.mark.parametrize("command", GIT_EXT)
def test_git_runs_the_ext_transport_s_command(command):
    assert bash_runs_rm(command, ("git",)), command


@pytest.mark.parametrize("command", GIT_EXT)
def test_git_s_ext_transport_is_not_allowed(command):
    assert decide(command) != "allow", command


# --- 6. decisions slower than their size --------------------------------------------------------
# docs/policy-language.md, "Limits of shell()": a text within the limits decides in under 10 ms.
# Two timings of one run are compared (no clock budget): the same length as one plain word.

def _best(command: str, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        clear_caches()
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            decide(command)
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


N = 99_980
SLOW = {
    "env -S (shlex builds each token a character at a time: quadratic)": "env -S '" + "a" * N + "'",
    "escaped backslashes in backquotes (a re.sub template per pair)": "echo `echo " + "\\\\" * (N // 2) + "`",
    "${x:-WORD} (read a character at a time)": "echo ${x:-" + "a" * N + "}",
}


@pytest.mark.parametrize("what", list(SLOW))
def test_a_long_text_decides_about_as_fast_as_a_plain_word(what):
    plain = "echo " + "a" * N
    _best(plain, 1)
    ratios = []
    for _ in range(3):
        ratios.append(_best(SLOW[what]) / _best(plain))
        if ratios[-1] <= 8:
            break
    assert min(ratios) <= 8, (what, ratios)


# --- 7. signed decisions: what `ledger verify --roster` accepts -----------------------------------

def _append(segment, body: bytes, newline: bool = True) -> str:
    import hashlib

    digest = hashlib.sha256(body).hexdigest()
    with open(segment, "ab") as f:
        f.write(b'{"body":' + body + b',"hash":"' + digest.encode() + b'","data":null}' + (b"\n" if newline else b""))
    return digest


def _last(segment):
    import msgspec

    line = msgspec.json.decode(segment.read_bytes().splitlines()[-1])
    return line["body"]["seq"], line["hash"], line["body"]["ts"]


def test_an_unsigned_approval_without_its_line_feed_fails_verify_with_a_roster(tmp_path):
    """An unsigned `approved` appended by hand, its final line feed left out: verify counts it
    (section 6: a whole line lacking only its line feed is an event) and reports the ledger intact,
    "every decision is signed", while a Gate opening the ledger sees the request approved."""
    from ledger import events as ev
    from ledger.proof.keys import generate_key
    from ledger.proof.roster import load_roster
    from ledger.proof.verify import verify
    from support import gate as make_gate
    from test_identity import _pending, _write, roster_text

    key = generate_key("sup-1")
    roster_path = _write(tmp_path, roster_text(("sup-1", "reviewer", [key.public.text()])))
    g, p = _pending(tmp_path, load_roster(roster_path))
    g.close()
    segment = tmp_path / "l" / "events-00000001.jsonl"
    seq, prev, ts = _last(segment)
    _append(segment, ev.encode_event(ev.Approved(seq=seq + 1, ts=ts, prev=prev, request=p.request, approver="sup-1",
                                                 args_digest=p.args_digest, comment=None)), newline=False)
    report = verify(tmp_path / "l", rosters=[load_roster(roster_path)])
    opened = make_gate(tmp_path / "l")
    status = opened.get(p.request).status
    opened.close()
    assert status == "approved"  # what the forged line achieves
    assert report.problem is not None and report.problem.kind == "signature", (report.ok, report.warnings)


def test_a_hand_appended_roster_event_cannot_bring_back_a_revoked_key(tmp_path):
    """Roster r1 lists sup-1 and mallory; the Gate then starts with r2, which removed mallory.
    Mallory, who can write the ledger's directory and kept her key, appends a `roster` event naming
    r1 (unsigned: anyone may write one) and an approval signed with her key. `verify --roster r1
    --roster r2` (both needed for the ledger's history) reports it intact."""
    import msgspec

    from ledger import events as ev
    from ledger.proof import decisions
    from ledger.proof.keys import generate_key
    from ledger.proof.roster import load_roster
    from ledger.proof.verify import verify
    from support import gate as make_gate
    from test_identity import roster_text

    sup, mallory = generate_key("sup-1"), generate_key("mallory")
    (tmp_path / "r1.toml").write_text(roster_text(("sup-1", "reviewer", [sup.public.text()]),
                                                  ("mallory", "reviewer", [mallory.public.text()])))
    (tmp_path / "r2.toml").write_text(roster_text(("sup-1", "reviewer", [sup.public.text()])))
    r1, r2 = load_roster(tmp_path / "r1.toml"), load_roster(tmp_path / "r2.toml")
    g = make_gate(tmp_path / "l")
    g.record_roster(r1, "ops")
    g.record_roster(r2, "ops")  # mallory's access revoked
    p = g.propose("small_change", {"id": 7}, proposer="agent-7")
    state = g.get(p.request)
    g.close()
    segment = tmp_path / "l" / "events-00000001.jsonl"
    ledger_id = msgspec.json.decode(segment.read_bytes().splitlines()[0])["body"]["ledger_id"]
    seq, prev, ts = _last(segment)
    prev = _append(segment, ev.encode_event(ev.RosterRecorded(seq=seq + 1, ts=ts, prev=prev, digest=r1.digest, by="ops")))
    approval = decisions.sign(ev.Approved(ts=ts, request=p.request, approver="mallory", args_digest=p.args_digest, comment=None),
                              mallory, signer="reviewer", ledger_id=ledger_id, basis=state.data_seq, args=state.digest, prev=prev)
    _append(segment, ev.encode_event(msgspec.structs.replace(approval, seq=seq + 2, prev=prev)))
    report = verify(tmp_path / "l", rosters=[r1, r2])
    assert report.problem is not None and report.problem.kind == "signature", report.ok
