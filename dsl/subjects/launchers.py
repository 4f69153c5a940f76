"""More programs that run the command after their options: tracers, sandboxes, process
supervisors, privilege droppers and environment changers, as data (the same shape as
dsl.subjects.wrappers's tables, which merges these into WRAPPERS).

Each entry names the manual (and version, Debian 12's unless said) it follows; the optstrings are
the programs' own where they use getopt(3). A program that is missing here is an ordinary command:
`strace rm -rf /` would be the program `strace` with the words `rm -rf /`, which a deny on `rm`
never sees. tests/test_shell_wrappers.py checks these tables against `--help` where installed and
runs each program with a harmless command.
"""

from __future__ import annotations

from dsl.subjects.optspec import ARGV_MODE, EXIT, HIDDEN, SHELL_MODE, Spec, spec

_HELP = {"help": EXIT, "version": EXIT}

# util-linux 2.38 setarch(8): "setarch, linux32 and linux64 ... and the architecture names (i386,
# x86_64, ...) are symbolic links to setarch": called by one of these names it is setarch with that
# arch, so the name is a wrapper of its own (`setarch -R i386 CMD` runs the program i386, which runs
# CMD). setarch.c's transitions table, for every architecture Debian builds util-linux for.
SETARCH_NAMES = (
    "uname26", "linux32", "linux64", "i386", "i486", "i586", "i686", "athlon", "x86_64", "ia64",
    "ppc", "ppc32", "ppc64", "ppc64le", "ppc64pseries", "ppc64iseries", "s390", "s390x", "sparc", "sparc32",
    "sparc32bash", "sparc64", "mips", "mips32", "mips64", "parisc", "parisc32", "parisc64", "arm", "armv7l",
    "armh", "armv8l", "armv8b", "aarch64", "alpha", "loongarch", "loongarch32", "loongarch64", "riscv64", "e2k",
)

_TRACERS = {
    # strace 6.1 strace(1), strace.c: "+a:Ab:cCdDe:E:fFhiI:kno:O:p:P:qrs:S:tTu:U:vVwxX:yYzZ"; -p PID
    # alone traces a running process (no command: the wrapper itself)
    "strace": spec(
        "strace 6.1 strace(1)", "a:Ab:cCdDe:E:fFhiI:kno:O:p:P:qrs:S:tTu:U:vVwxX:yYzZ",
        "columns=a output-append-mode=A detach-on=b summary-only=c summary=C debug=d daemonize:: env=E "
        "follow-forks=f output-separately help=h instruction-pointer=i interruptible=I stack-traces=k "
        "syscall-number=n output=o summary-syscall-overhead=O attach=p trace-path=P quiet:: "
        "relative-timestamps:: string-limit=s summary-sort-by=S absolute-timestamps:: timestamps:: "
        "syscall-times:: user=u summary-columns=U no-abbrev=v version=V summary-wall-clock=w "
        "strings-in-hex:: const-print-style=X decode-fds:: decode-pids: successful-only=z failed-only=Z "
        "trace: abbrev: verbose: raw: read: write: signal: status: inject: fault: kvm: seccomp-bpf tips:: "
        "secontext::",
        does={"h": EXIT, "V": EXIT}),
    # ltrace 0.7.3 ltrace(1), options.c: "+cfhiLrStTVb" "a:A:D:e:F:l:n:o:p:s:u:x:X:w:"
    "ltrace": spec(
        "ltrace 0.7.3 ltrace(1)", "a:A:bcCD:e:fF:hil:Ln:o:p:rs:StTu:Vw:x:X:",
        "align=a no-signals=b demangle=C debug=D config=F help=h library=l indent=n output=o version=V where=w",
        does={"h": EXIT, "V": EXIT}),
    # valgrind 3.19 valgrind(1): every option but -h, -q, -v, -d is `--name` or `--name=value`
    "valgrind": spec("valgrind 3.19 valgrind(1)", "hqvd", "help help-debug help-dyn-options version",
                     does={"h": EXIT, "help": EXIT, "help-debug": EXIT, "help-dyn-options": EXIT, "version": EXIT},
                     any_long=True, abbreviations=False),
}

_SANDBOXES = {
    # bubblewrap 0.8.0 bwrap(1): exact `--name` options, some with two values; `--args FD` reads
    # more of the command line from FD (not known here)
    "bwrap": spec(
        "bubblewrap 0.8.0 bwrap(1)", "",
        "help version args; argv0; level-prefix unshare-all share-net unshare-user unshare-user-try unshare-ipc "
        "unshare-pid unshare-net unshare-uts unshare-cgroup unshare-cgroup-try userns; userns2; disable-userns "
        "assert-userns-disabled pidns; uid; gid; hostname; chdir; clearenv setenv;; unsetenv; lock-file; "
        "sync-fd; bind;; bind-try;; dev-bind;; dev-bind-try;; ro-bind;; ro-bind-try;; bind-fd;; ro-bind-fd;; "
        "remount-ro; exec-label; file-label; proc; dev; tmpfs; mqueue; dir; file;; bind-data;; ro-bind-data;; "
        "symlink;; seccomp; add-seccomp-fd; block-fd; userns-block-fd; info-fd; json-status-fd; new-session "
        "die-with-parent as-pid-1 cap-add; cap-drop; perms; size; chmod;;",
        does={**_HELP, "args": HIDDEN}, abbreviations=False),
    # SELinux: GNU coreutils 9.1 runcon(1): `runcon CONTEXT CMD`, or with -c/-t/-u/-r/-l no CONTEXT
    "runcon": spec("GNU coreutils 9.1 runcon(1)", "r:t:u:l:c",
                   "role=r type=t user=u range=l compute=c help version",
                   does={"r": ARGV_MODE, "t": ARGV_MODE, "u": ARGV_MODE, "l": ARGV_MODE, "c": ARGV_MODE, **_HELP},
                   skip=1),
    # fakeroot 1.31 fakeroot(1): the script's `getopt -l lib: -l faked: ... -- +l:f:i:s:ub:vh`; no
    # command: ${SHELL:-/bin/sh}
    "fakeroot": spec("fakeroot 1.31 fakeroot(1)", "l:f:i:s:ub:vh",
                     "lib=l faked=f unknown-is-real=u fd-base=b version=v help=h",
                     does={"v": EXIT, "h": EXIT}, bare_shell=True),
    # libfaketime 0.9.10 faketime(1): `faketime [switches] TIMESTAMP PROGRAM ARGS`, each switch a
    # word of its own
    "faketime": spec("libfaketime 0.9.10 faketime(1)", "mfp:hv", "exclude-monotonic disable-shm date-prog: help version",
                     does={"h": EXIT, "v": EXIT, **_HELP}, skip=1, clusters=False, abbreviations=False),
    # libeatmydata 131 eatmydata(1): `eatmydata [--] COMMAND [ARGS]`
    "eatmydata": spec("libeatmydata 131 eatmydata(1)", "", abbreviations=False),
    # torsocks 2.3.0 torsocks(1): its own loop over the words; --shell starts a shell
    "torsocks": spec("torsocks 2.3.0 torsocks(1)", "hdu:p:i6a:P:q",
                     "help=h shell debug=d user=u pass=p isolate=i ipv6=6 address=a port=P quiet=q version",
                     does={"h": EXIT, "version": EXIT, "shell": SHELL_MODE}, clusters=False, abbreviations=False),
    # proxychains-ng 4.16 proxychains4(1): `-q`, `-f FILE`, then the program
    "proxychains4": spec("proxychains-ng 4.16 proxychains4(1)", "qf:", clusters=False, abbreviations=False),
    "proxychains": spec("proxychains-ng 4.16 proxychains4(1)", "qf:", clusters=False, abbreviations=False),
    # firejail's and sandbox-exec's tables are in dsl.subjects.wrappers
}

_SUPERVISORS = {
    # tini 0.19.0 tini(1): getopt "p:hvwgle:s" without `+`, so glibc would take the program's own
    # options for tini's (hence `tini -- PROG ARGS`). Read as if options end at the program: the
    # program is the same, and its words stay with it (`tini rm -rf /` shows rm -rf /, which a
    # deny sees; tini itself refuses -r)
    "tini": spec("tini 0.19.0 tini(1)", "p:hvwgle:s", "version", does={"h": EXIT, "l": EXIT, "version": EXIT},
                 abbreviations=False),
    # dumb-init 1.2.5 dumb-init(1): getopt_long "+hvVcr:"
    "dumb-init": spec("dumb-init 1.2.5 dumb-init(1)", "hvVcr:", "help=h verbose=v version=V single-child=c rewrite=r",
                      does={"h": EXIT, "V": EXIT}),
    # moreutils 0.67 chronic(1) (Getopt::Std "ev") and ifne(1) ("n")
    "chronic": spec("moreutils 0.67 chronic(1)", "ev", abbreviations=False),
    "ifne": spec("moreutils 0.67 ifne(1)", "n", abbreviations=False),
    # expect 5.45.4 unbuffer(1): `unbuffer [-p] PROGRAM ARGS`
    "unbuffer": spec("expect 5.45.4 unbuffer(1)", "p", clusters=False, abbreviations=False),
    # OpenSSH 9.2 ssh-agent(1): "cDdksE:a:O:P:t:"; with a command it runs it (-k kills an agent)
    "ssh-agent": spec("OpenSSH 9.2 ssh-agent(1)", "cDdksE:a:O:P:t:", does={"k": EXIT}, abbreviations=False),
    # dbus 1.14 dbus-run-session(1): `[--config-file=F] [--dbus-daemon=BIN] [--] PROGRAM ARGS`
    "dbus-run-session": spec("dbus 1.14 dbus-run-session(1)", "", "config-file: dbus-daemon: help version",
                             does=_HELP, abbreviations=False),
    # xvfb 21.1 xvfb-run(1): the script's `getopt --options +ae:f:hn:lp:s:w: --long ...`
    "xvfb-run": spec("xvfb 21.1 xvfb-run(1)", "ae:f:hn:lp:s:w:",
                     "auto-servernum=a error-file=e auth-file=f help=h server-num=n listen-tcp=l "
                     "xauth-protocol=p server-args=s wait=w",
                     does={"h": EXIT}),
}

_IDENTITY = {
    # gosu 1.14 (README): `gosu USER-SPEC COMMAND ARGS`, no options; su-exec 0.2 (README) the same
    "gosu": spec("gosu 1.14 gosu(1)", "", "help version", does=_HELP, skip=1, abbreviations=False),
    "su-exec": spec("su-exec 0.2 su-exec(1)", "", skip=1, abbreviations=False),
    # runit 2.1.2 chpst(8): "u:U:b:e:m:d:o:p:f:c:r:t:/:n:l:L:vP012V"
    "chpst": spec("runit 2.1.2 chpst(8)", "u:U:b:e:m:d:o:p:f:c:r:t:/:n:l:L:vP012V", does={"V": EXIT},
                  abbreviations=False),
    # daemontools 0.76: setuidgid(8), envuidgid(8), envdir(8) take one operand before the child;
    # softlimit(8) "a:c:d:f:l:m:o:p:r:s:t:"; pgrphack(8) and fghack(8) none; setlock(8) "nNxX" FILE
    "setuidgid": spec("daemontools 0.76 setuidgid(8)", "", skip=1, abbreviations=False),
    "envuidgid": spec("daemontools 0.76 envuidgid(8)", "", skip=1, abbreviations=False),
    "envdir": spec("daemontools 0.76 envdir(8)", "", skip=1, abbreviations=False),
    "softlimit": spec("daemontools 0.76 softlimit(8)", "a:c:d:f:l:m:o:p:r:s:t:", abbreviations=False),
    "pgrphack": spec("daemontools 0.76 pgrphack(8)", "", abbreviations=False),
    "fghack": spec("daemontools 0.76 fghack(8)", "", abbreviations=False),
    "setlock": spec("daemontools 0.76 setlock(8)", "nNxX", skip=1, abbreviations=False),
}

LAUNCHERS: dict[str, Spec] = {**_TRACERS, **_SANDBOXES, **_SUPERVISORS, **_IDENTITY}
"""Programs that run the command after their options, beside dsl.subjects.wrappers's: name -> Spec."""
