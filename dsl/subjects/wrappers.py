"""The programs that run other programs, and how each reads its own command line, as data.

Each entry follows the manual it names (the option letters are getopt(3) optstrings, as in the
program's source): which options take a value and how, which end the options, which run a script
or no command at all, and how many operands stand before the command. `dsl.subjects.getopt` reads
a command line with one of these tables. An option a table does not list makes the command dynamic
(see `read`), so a table errs on the side of listing fewer options rather than guessing.

tests/test_shell_wrappers.py checks each table against the program's own `--help` where the program
is installed, and runs the program with a harmless command to check the same program is named.
"""

from __future__ import annotations

import dataclasses

from dsl.subjects.devrunners import DEV_RUNNERS, DEV_WRAPPERS
from dsl.subjects.launchers import LAUNCHERS, SETARCH_NAMES
from dsl.subjects.optspec import (
    APPLET, ARGV_MODE, CODE, END, ENV_ASSIGNMENTS, EXIT, EXIT_BARE, FILL, INTERPRETER, LOGIN_SHELL, MODULE, NEXT, NONE, SCRIPT, SCRIPT_OPERAND, SESSION,
    SH_WORDS, SHELL, SHELL_MODE, SPLIT, STDIN, SUDO_ASSIGNMENTS, Opt, Spec, spec,
)

_HELP = {"help": EXIT, "version": EXIT}

# --- GNU coreutils 9.1 (env(1), timeout(1), nice(1), nohup(1), stdbuf(1), chroot(1)), GNU time 1.9 ---

_COREUTILS = {
    "env": spec(
        "GNU coreutils 9.1 env(1)", "C:iS:u:v0",
        "chdir=C ignore-environment=i split-string=S unset=u debug=v null=0 block-signal:: default-signal:: "
        "ignore-signal:: list-signal-handling help version",
        # `env -` is `env -i`: GNU env (env.c) takes it only as its first operand, after the
        # options; BSD env (macOS) as an option, reading options on after it (dsl.subjects.getopt
        # follows both). Every operand with a `=` then is an assignment, whatever its name.
        does={"S": SPLIT, **_HELP}, assignments=ENV_ASSIGNMENTS, lone_dash=Opt(),
    ),
    "timeout": spec("GNU coreutils 9.1 timeout(1)", "k:s:v",
                    "kill-after=k signal=s verbose=v preserve-status foreground help version", does=_HELP, skip=1),
    "nice": spec("GNU coreutils 9.1 nice(1)", "n:", "adjustment=n help version", does=_HELP, numeric=True),
    "nohup": spec("GNU coreutils 9.1 nohup(1)", "", "help version", does=_HELP),
    "stdbuf": spec("GNU coreutils 9.1 stdbuf(1)", "i:o:e:", "input=i output=o error=e help version", does=_HELP),
    "chroot": spec("GNU coreutils 9.1 chroot(1)", "", "groups: userspec: skip-chdir help version", does=_HELP,
                   skip=1, bare_shell=True),  # no command: `${SHELL} -i`
    "time": spec("GNU time 1.9 time(1), and bash 5.2's `time -p`", "af:o:pqvV",
                 "append=a format=f output=o portability=p quiet=q verbose=v help version=V",
                 does={"V": EXIT, "help": EXIT}),
}

# --- util-linux 2.38 (su(1), runuser(1), script(1), setsid(1), taskset(1), ionice(1), chrt(1),
# prlimit(1), unshare(1), nsenter(1), setpriv(1), flock(1), setarch(8)) ---

_SU_SHORT = "c:fg:G:lmpPs:hVw:"
_SU_LONG = ("command=c session-command: fast=f group=g supp-group=G login=l preserve-environment=m pty=P "
            "shell=s help=h version=V whitelist-environment=w")
_UTIL_LINUX = {
    # su has no `+`: options may follow the user (`su root -c CMD`); a first operand `-` is `-l`.
    "su": spec("util-linux 2.38 su(1)", _SU_SHORT, _SU_LONG,
               does={"c": SCRIPT, "session-command": SCRIPT, "h": EXIT, "V": EXIT, "s": LOGIN_SHELL},
               runs=SESSION, skip=1, shell_args=True, permute=True, lone_dash=Opt()),
    "runuser": spec("util-linux 2.38 runuser(1)", _SU_SHORT + "u:", _SU_LONG + " user=u",
                    does={"c": SCRIPT, "session-command": SCRIPT, "h": EXIT, "V": EXIT, "u": ARGV_MODE, "s": LOGIN_SHELL},
                    runs=SESSION, skip=1, shell_args=True, permute=True, lone_dash=Opt()),
    "script": spec("util-linux 2.38 script(1)", "aB:c:eE:fI:O:o:qm:T:t::Vh",
                   "append=a command=c echo=E return=e flush=f force log-in=I log-out=O log-io=B log-timing=T "
                   "logging-format=m output-limit=o quiet=q timing=t version=V help=h",
                   does={"c": SCRIPT, "V": EXIT, "h": EXIT}, runs=SESSION, permute=True),
    "setsid": spec("util-linux 2.38 setsid(1)", "cfwhV", "ctty=c fork=f wait=w help=h version=V",
                   does={"h": EXIT, "V": EXIT}),
    "taskset": spec("util-linux 2.38 taskset(1)", "apchV", "all-tasks=a pid=p cpu-list=c help=h version=V",
                    does={"p": EXIT, "h": EXIT, "V": EXIT}, skip=1),  # the mask (or list) first
    "ionice": spec("util-linux 2.38 ionice(1)", "c:n:p:P:tu:Vh",
                   "class=c classdata=n pid=p pgid=P ignore=t uid=u version=V help=h",
                   does={"p": EXIT, "P": EXIT, "u": EXIT, "h": EXIT, "V": EXIT}),
    "chrt": spec("util-linux 2.38 chrt(1)", "abdD:fiphmoP:T:rRvV",
                 "all-tasks=a batch=b deadline=d fifo=f idle=i pid=p help=h max=m other=o rr=r "
                 "reset-on-fork=R sched-runtime=T sched-period=P sched-deadline=D verbose=v version=V",
                 does={"p": EXIT, "m": EXIT, "h": EXIT, "V": EXIT}, skip=1),  # the priority first
    "prlimit": spec("util-linux 2.38 prlimit(1)", "c::d::e::f::i::l::m::n::o:p:q::r::s::t::u::v::x::y::hV",
                    "core=c data=d nice=e fsize=f sigpending=i memlock=l rss=m nofile=n msgqueue=q rtprio=r "
                    "stack=s cpu=t nproc=u as=v locks=x rttime=y output=o pid=p noheadings raw verbose "
                    "help=h version=V",
                    does={"p": EXIT, "h": EXIT, "V": EXIT}),
    "unshare": spec("util-linux 2.38 unshare(1)", "fhVm::u::i::n::p::C::U::T::rR:w:S:G:c",
                    "help=h version=V mount=m uts=u ipc=i net=n pid=p user=U cgroup=C time=T fork=f "
                    "kill-child:: mount-proc:: mount-binfmt:: map-user: map-group: map-root-user=r "
                    "map-current-user=c map-auto map-users: map-groups: propagation: setgroups: keep-caps "
                    "setuid=S setgid=G root=R wd=w monotonic: boottime: load-interp:",
                    does={"h": EXIT, "V": EXIT}, bare_shell=True),  # no program: ${SHELL}
    "nsenter": spec("util-linux 2.38 nsenter(1)", "ahVt:m::u::i::n::p::C::U::T::S:G:r::w::W:FZ",
                    "all=a help=h version=V target=t mount=m uts=u ipc=i net=n pid=p cgroup=C user=U "
                    "time=T setuid=S setgid=G root=r wd=w wdns=W no-fork=F follow-context=Z "
                    "preserve-credentials user-parent keep-caps env join-cgroup",
                    does={"h": EXIT, "V": EXIT}, bare_shell=True),
    "setpriv": spec("util-linux 2.38 setpriv(1)", "dhV",
                    "dump=d nnp no-new-privs inh-caps: ambient-caps: bounding-set: ruid: euid: rgid: egid: "
                    "reuid: regid: clear-groups keep-groups init-groups groups: securebits: pdeathsig: "
                    "selinux-label: apparmor-profile: landlock-access: landlock-rule: reset-env help=h version=V",
                    does={"d": EXIT, "h": EXIT, "V": EXIT}),
    "flock": spec("util-linux 2.38 flock(1)", "sexnouw:E:Fc:hV",
                  "shared=s exclusive=x unlock=u nonblock=n nb=n close=o timeout=w wait=w "
                  "conflict-exit-code=E no-fork=F command=c verbose help=h version=V",
                  does={"c": SCRIPT, "h": EXIT, "V": EXIT}, skip=1, dash_c_after_skip=True),
    # setarch [ARCH] [options] [program]: ARCH only when the first word is no option (since 2.33);
# linux32/linux64 are setarch without the ARCH. No program: /bin/sh.
    "setarch": spec("util-linux 2.38 setarch(8)", "hVv3BFILRSTXZ",
                    "help=h version=V verbose=v 3gb=3 4gb uname-2.6 32bit=B fdpic-funcptrs=F short-inode=I "
                    "addr-compat-layout=L addr-no-randomize=R whole-seconds=S sticky-timeouts=T "
                    "read-implies-exec=X mmap-page-zero=Z list",
                    does={"h": EXIT, "V": EXIT, "list": EXIT}, leading=1, bare_shell=True),
}
# Called by another name (a symbolic link: linux32, linux64, i386, x86_64, ...), setarch takes that
# name for the arch: no ARCH operand (dsl.subjects.launchers.SETARCH_NAMES, from setarch.c).
_SETARCH_AS_NAME = dataclasses.replace(_UTIL_LINUX["setarch"], leading=0)
_UTIL_LINUX.update({name: _SETARCH_AS_NAME for name in SETARCH_NAMES})

# --- privilege and identity ---

_PRIVILEGE = {
    # sudo 1.9.13 sudo(8), parse_args.c: "+Aa:BbC:c:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv"
    "sudo": spec(
        "sudo 1.9.13 sudo(8)", "Aa:BbC:c:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv",
        "askpass=A auth-type=a background=b bell=B close-from=C login-class=c chdir=D preserve-env:: edit=e "
        "group=g set-home=H help host: login=i remove-timestamp=K reset-timestamp=k list=l no-update=N "
        "non-interactive=n preserve-groups=P prompt=p chroot=R role=r stdin=S shell=s type=t "
        "command-timeout=T other-user=U user=u version=V validate=v",
        does={"e": EXIT, "K": EXIT, "l": EXIT, "V": EXIT, "v": EXIT, "help": EXIT, "h": EXIT_BARE, "i": SHELL_MODE,
              "s": SHELL_MODE},
        # NAME=VALUE words may stand among the options (parse_args.c, `is_envar`; sudo-rs 0.2 too)
        assignments=SUDO_ASSIGNMENTS,
    ),
    # OpenBSD doas(1) (7.4) and OpenDoas 6.8: "+a:C:Lnsu:"; -C checks a config and runs nothing
    "doas": spec("OpenBSD 7.4 doas(1)", "a:C:Lnsu:", does={"C": EXIT, "L": EXIT, "s": SHELL_MODE}),
    # polkit 122 pkexec(1): its own loop over leading --options, exact names; no program: $SHELL
    "pkexec": spec("polkit 122 pkexec(1)", "", "user: disable-internal-agent keep-cwd help version",
                   does=_HELP, abbreviations=False, bare_shell=True),
    # shadow 4.13 sg(1): sg [-] [group [-c] command]; the command is one string for /bin/sh -c
    "sg": spec("shadow 4.13 sg(1)", "", "", runs=SH_WORDS, skip=1, lone_dash=Opt(), bare_shell=True,
               dash_c_after_skip=True),
    "newgrp": spec("shadow 4.13 newgrp(1)", "", "", runs=SESSION, skip=1, lone_dash=Opt()),  # starts a shell
    # systemd 252 systemd-run(1): "+hrC:H:M:E:p:tPqGdSu:"
    "systemd-run": spec(
        "systemd 252 systemd-run(1)", "hrH:M:E:p:tPqGdSu:",
        "help=h version user system scope unit=u description: slice: slice-inherit remain-after-exit=r "
        "send-sighup host=H machine=M service-type: wait uid: gid: nice: setenv=E property=p tty=t pty=t "
        "pipe=P quiet=q on-active: on-boot: on-startup: on-unit-active: on-unit-inactive: on-calendar: "
        "on-timezone-change on-clock-change timer-property: path-property: socket-property: no-block "
        "no-ask-password collect=G working-directory: same-dir=d shell=S json: ignore-failure "
        "background:",
        does={"h": EXIT, "version": EXIT, "S": SHELL_MODE},
    ),
    # firejail 0.9.72 firejail(1): every option is `--name` or `--name=value`; no program: a shell
    "firejail": spec("firejail 0.9.72 firejail(1)", "", "help version", does=_HELP, any_long=True,
                     abbreviations=False, bare_shell=True),
    # numactl 2.0.16 numactl(8)
    # (only the documented policy options; any other makes the command dynamic)
    "numactl": spec("numactl 2.0.16 numactl(8)", "i:p:P:m:N:C:w:lashH",
                    "interleave=i preferred=p preferred-many=P membind=m cpunodebind=N physcpubind=C "
                    "weighted-interleave=w localalloc=l all=a show=s hardware=H help=h",
                    does={"s": EXIT, "H": EXIT, "h": EXIT}),
    # macOS caffeinate(8) (macOS 14): BSD getopt "disumt:w:"
    "caffeinate": spec("macOS 14 caffeinate(8)", "disumt:w:", abbreviations=False),
    # macOS arch(1): `-arch NAME` or `-NAME`, one dash; -c, -d NAME, -e NAME=VALUE, -h
    "arch": spec("macOS 14 arch(1)", "", "arch: c d: e: h 32 64", does={"h": EXIT}, single_dash_long=True,
                 any_long=True, abbreviations=False, clusters=False),
    # macOS sandbox-exec(1): BSD getopt "f:n:p:D:"
    "sandbox-exec": spec("macOS 14 sandbox-exec(1)", "f:n:p:D:", abbreviations=False),
}

# --- bash 5.2 builtins and keywords that run the command after them ---

_BUILTINS = {
    "command": spec("bash 5.2 bash(1) `command`", "pvV", does={"v": EXIT, "V": EXIT}, abbreviations=False),
    "builtin": spec("bash 5.2 bash(1) `builtin`", "", abbreviations=False),
    "exec": spec("bash 5.2 bash(1) `exec`", "cla:", abbreviations=False),
    "coproc": spec("bash 5.2 bash(1) `coproc`", "", abbreviations=False),
}

# bash 5.2 builtins whose option is a command they run (bash(1), SHELL BUILTIN COMMANDS; each reads
# its options with bash's internal_getopt: clusters, attached values, `--`). CODE marks a word list
# bash expands (compgen -W), read as the words of a command. mapfile's callback is
# run with the index and the line appended; compgen -C runs at once, complete -C at completion.
CALLBACK_BUILTINS: dict[str, Spec] = {
    "mapfile": spec("bash 5.2 bash(1) `mapfile`", "d:u:n:O:tC:c:s:", does={"C": SCRIPT}, abbreviations=False),
    # -W WORDLIST: "each resultant word is expanded" (bash(1), Programmable Completion): its
    # substitutions run, at once for compgen, at completion for complete (CODE: read as words)
    "compgen": spec("bash 5.2 bash(1) `compgen`", "abcdefgjksuvo:A:G:W:F:C:X:P:S:V:", does={"C": SCRIPT, "W": CODE},
                    abbreviations=False),
    "complete": spec("bash 5.2 bash(1) `complete`", "abcdefgjksuvprDEIo:A:G:W:F:C:X:P:S:",
                     does={"C": SCRIPT, "W": CODE}, abbreviations=False),
}
CALLBACK_BUILTINS["readarray"] = CALLBACK_BUILTINS["mapfile"]

# --- multi-call binaries: the first operand names the program ---

_MULTICALL = {
    # BusyBox 1.36 busybox(1): `busybox APPLET ARGS`; --list, --help, --install run none
    "busybox": spec("BusyBox 1.36 busybox(1)", "", "list list-full help install", runs=APPLET,
                    does={"list": EXIT, "list-full": EXIT, "help": EXIT, "install": EXIT}, abbreviations=False),
}

# --- runners with their own reading of the rest ---

_RUNNERS = {
    # GNU findutils 4.9 xargs(1): "+0a:E:e::i::I:l::L:n:prs:txP:d:o"; echo when no command
    "xargs": spec(
        "GNU findutils 4.9 xargs(1)", "0a:E:e::i::I:l::L:n:prs:txP:d:o",
        "null=0 arg-file=a delimiter=d eof=e replace=i max-lines=l max-args=n open-tty=o interactive=p "
        "no-run-if-empty=r max-chars=s verbose=t show-limits exit=x max-procs=P process-slot-var: help version",
        does={**_HELP, "I": FILL, "i": FILL}, default=("echo",), dynamic_inner=True,
    ),
    # GNU parallel 20221122 parallel(1), Getopt::Long ("bundling", "require_order"): the command is
    # the words before the first `:::`, `::::`, `:::+` or `::::+` (the arguments follow), joined and
    # run by a shell; `{}`, `{.}`, `{/}`, `{#}`, `{3}`, `{= perl =}` ... are replaced in it by each
    # argument, which is appended when none is there; -q/--quote keeps the words as a command (no
    # shell). Only its common options are tabled: any other makes it dynamic.
    "parallel": spec(
        "GNU parallel 20221122 parallel(1)", "0a:C:d:D:E:gI:j:kL:mn:N:P:qrs:S:tuvXhV",
        "null=0 arg-file=a colsep=C delimiter=d debug=D eof=E group=g jobs=j keep-order=k max-lines=L "
        "max-args=n max-replace-args=N max-procs=P quote=q no-run-if-empty=r max-chars=s sshlogin=S "
        "verbose=v ungroup=u xargs help=h version=V joblog: results: res: halt: timeout: retries: delay: "
        "load: memfree: tag tagstring: line-buffer lb bar eta progress dry-run will-cite no-notice plus "
        "pipe pipepart block: recstart: recend: header: env: workdir: wd: tmpdir: shuf nice: "
        "extensionreplace: basenamereplace: dirnamereplace: basenameextensionreplace: seqreplace: "
        "slotreplace:",
        does={"h": EXIT, "V": EXIT, "I": FILL, "q": ARGV_MODE, **{name: FILL for name in (
            "extensionreplace", "basenamereplace", "dirnamereplace", "basenameextensionreplace", "seqreplace",
            "slotreplace")}}, runs=SH_WORDS, dynamic_inner=True,
        separators=(":::", "::::", ":::+", "::::+"), fill=r"\{[^{}]*\}"),
    # procps-ng 4.0 watch(1): "+bced::ghq:n:ptvwx"; the words joined and run by `sh -c` unless -x
    "watch": spec("procps-ng 4.0 watch(1)", "bced::ghq:n:ptvwx",
                  "beep=b color=c differences=d errexit=e chgexit=g equexit=q interval=n precise=p "
                  "no-title=t no-wrap=w exec=x help=h version=v",
                  does={"x": ARGV_MODE, "h": EXIT, "v": EXIT}, runs=SH_WORDS),
}

# --- shells ---
# bash 5.2 bash(1), INVOCATION and `set`: long options come first, exact names, one dash or two
# (`-rcfile F`); -o and -O take the next word, even from inside a cluster (`-co posix`).
_BASH_LETTERS = "abefhkmnptuvxBCEHPTilrsD"
_BASH = spec("bash 5.2 bash(1)", _BASH_LETTERS + "c" + "o;O;",
             "debug debugger dump-po-strings dump-strings help init-file: rcfile: login noediting noprofile norc "
             "posix pretty-print restricted verbose version wordexp",
             does={"c": SCRIPT_OPERAND, "s": STDIN, **_HELP}, runs=SHELL, abbreviations=False,
             single_dash_long=True, plus=True, lone_dash=Opt(ends=True))
# dash 0.5.12 dash(1): `dash [-aCefnuvxIimVEbp] [+...] [-o option] [-c string | -s | file]`, -l (the
# manual also lists -q, which this dash rejects)
_DASH = spec("dash 0.5.12 dash(1)", "aCefnuvxIimVEbplc" + "o;s",
             does={"c": SCRIPT_OPERAND, "s": STDIN}, runs=SHELL, abbreviations=False, plus=True,
             lone_dash=Opt(ends=True))
# `sh` is dash on Debian and bash on macOS: bash's table reads every option dash has, and more.
_SH = _BASH
# zsh 5.9 zsh(1), zshoptions(1): nearly every letter sets an option; -o NAME (attached or the next
# word); `--OPTNAME` sets one; -b ends the options; `-c` makes the first operand the script.
_ZSH = spec("zsh 5.9 zsh(1)", "0123456789abdefghijklmnpqrtuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + "co:s",
            "help version", does={"c": SCRIPT_OPERAND, "s": STDIN, **_HELP}, ends="b", runs=SHELL,
            abbreviations=False, plus=True, any_long=True, lone_dash=Opt(ends=True))
# ksh93u+m ksh(1): `ksh [+-abcefhikmnoprstuvxBCDEGHP] [-R file] [+-o option] [-] [arg ...]`
_KSH93 = spec("ksh 93u+m/1.0 ksh(1)", "abefhikmnprtuvxBCDEGHP" + "c" + "o;R:s",
              does={"c": SCRIPT_OPERAND, "s": STDIN}, runs=SHELL, abbreviations=False, plus=True,
              lone_dash=Opt(ends=True))
# mksh R59 mksh(1): `mksh [-+abCefhiklmnprUuvXx] [-T [!]tty | -] [-+o option] [-c string | -s | file]`
_MKSH = spec("mksh R59 mksh(1)", "abCefhiklmnprUuvXx" + "c" + "o;T;s",
             does={"c": SCRIPT_OPERAND, "s": STDIN}, runs=SHELL, abbreviations=False, plus=True,
             lone_dash=Opt(ends=True))
# posh 0.14 posh(1) (from pdksh): `posh [-+abCefhiklmnprsuvxX] [-+o option] [-c string | -s | file]`
_POSH = spec("posh 0.14 posh(1)", "abCefhiklmnpruvxX" + "c" + "o;s",
             does={"c": SCRIPT_OPERAND, "s": STDIN}, runs=SHELL, abbreviations=False, plus=True,
             lone_dash=Opt(ends=True))
# yash 2.55 yash(1): short options, -o NAME, --profile FILE, --rcfile FILE, and `--OPTNAME` for the rest
_YASH = spec("yash 2.55 yash(1)", "abCefhilmnuvx" + "c" + "o;s",
             "profile: rcfile: noprofile norcfile help version", does={"c": SCRIPT_OPERAND, "s": STDIN, **_HELP},
             runs=SHELL, abbreviations=False, plus=True, any_long=True, lone_dash=Opt(ends=True))
# tcsh 6.24 tcsh(1), csh(1): -c takes the next word as its script; -b ends the options
_TCSH = spec("tcsh 6.24 tcsh(1)", "defFilmnqstvVxX" + "c;b", does={"c": SCRIPT, "s": STDIN}, ends="b",
             runs=SHELL, abbreviations=False, lone_dash=Opt(ends=True))
# fish 3.6 fish(1), getopt_long "+hPilNnvc:C:p:d:f:D:o:": -c (repeatable) and -C are scripts
_FISH = spec("fish 3.6 fish(1)", "hPilNnvc:C:p:d:f:D:o:",
             "command=c init-command=C debug=d debug-output=o debug-stack-frames=D features=f interactive=i "
             "login=l no-config=N no-execute=n profile=p profile-startup: private=P print-rusage-self "
             "print-debug-categories help=h version=v",
             does={"c": SCRIPT, "C": SCRIPT, "h": EXIT, "v": EXIT, "print-debug-categories": EXIT}, runs=SHELL)
# BusyBox 1.36 ash and hush: `sh [-/+OPTIONS] [-/+o OPT]... [-c 'SCRIPT' [ARG0 ARGS] | FILE ARGS | -s ARGS]`
_ASH = spec("BusyBox 1.36 ash", "aCefnuvxIimlbp" + "c" + "o;s", does={"c": SCRIPT_OPERAND, "s": STDIN},
            runs=SHELL, abbreviations=False, plus=True, lone_dash=Opt(ends=True))

_SHELLS = {
    "sh": _SH, "bash": _BASH, "rbash": _BASH, "dash": _DASH, "zsh": _ZSH, "ksh": _KSH93, "ksh93": _KSH93,
    "mksh": _MKSH, "lksh": _MKSH, "pdksh": _MKSH, "oksh": _MKSH, "posh": _POSH, "yash": _YASH, "csh": _TCSH,
    "tcsh": _TCSH, "fish": _FISH, "ash": _ASH, "hush": _ASH,
}

# --- interpreters: their code is kept (Command.code), not read ---

# CPython 3.11 python(1): -c and -m end the options; `-` is standard input; -i reads it after the script
_PYTHON = spec("CPython 3.11 python(1)", "bBc:dEhiIm:OPqsSuvVW:xX:",
               "help help-env help-xoptions help-all version check-hash-based-pycs:",
               does={"c": CODE, "m": MODULE, "i": STDIN, "h": EXIT, "V": EXIT, "help": EXIT, "help-env": EXIT,
                     "help-xoptions": EXIT, "help-all": EXIT, "version": EXIT},
               ends="c m", runs=INTERPRETER, abbreviations=False, lone_dash=Opt(does=STDIN, ends=True))
# perl 5.36 perlrun(1): -e/-E code (attached or the next word); -i, -0, -l, -C, -d, -D, -x, -F take
# only an attached value (`-pie` is -p -i with the extension "e"); -I, -m, -M take one either way.
# -0 takes only octal digits (or x and the rest of the word: perl reads -0xHHH so), -l only octal
# digits, -C only a number or letters of its list, and the cluster goes on after them (`-lne CODE`,
# `-0777ne CODE`, `-F: -lane CODE`).
_PERL = spec("perl 5.36 perlrun(1)", "0::aC::cd::D::e:E:fF::hi::I:l::m:M:npsStTuUvV::wWx::X",
             does={"e": CODE, "E": CODE, "h": EXIT, "v": EXIT, "V": EXIT}, runs=INTERPRETER,
             attached={"0": r"x.*|[0-7]*", "l": r"[0-7]*", "C": r"[0-9]+|[IOESioDALa]*"},
             abbreviations=False, lone_dash=Opt(does=STDIN, ends=True))
# ruby 3.1 ruby(1)
_RUBY = spec("ruby 3.1 ruby(1)", "0::acC:de:E:F::hi::I:lnpr:sSvwW::x::",
             "help version copyright verbose enable: disable: encoding: external-encoding: internal-encoding: "
             "dump: yjit jit",
             does={"e": CODE, "h": EXIT, "help": EXIT, "version": EXIT, "copyright": EXIT}, runs=INTERPRETER,
             abbreviations=False, lone_dash=Opt(does=STDIN, ends=True))
# Node.js 20 node(1): -e/--eval, -p/--print and `-pe` take code; `--opt=value` never takes the next word
_NODE = spec("Node.js 20 node(1)", "e:p:cir:hv",
             "eval=e print=p check=c interactive=i require=r import: loader: experimental-loader: input-type: "
             "conditions: title: env-file: inspect:: inspect-brk:: inspect-port: max-old-space-size: "
             "stack-size: no-warnings no-deprecation trace-warnings enable-source-maps test watch "
             "experimental-vm-modules expose-gc abort-on-uncaught-exception preserve-symlinks help=h version=v pe:",
             does={"e": CODE, "p": CODE, "pe": CODE, "i": STDIN, "h": EXIT, "v": EXIT}, runs=INTERPRETER,
             abbreviations=False, clusters=False, single_dash_long=True, lone_dash=Opt(does=STDIN, ends=True))
# PHP 8.2 php(1): -r, -B, -R, -E code; -f FILE the script; -a interactive (standard input)
_PHP = spec("PHP 8.2 php(1)", "aB:c:d:eE:f:F:hilmnqr:R:sS:t:vwz:H",
            "interactive=a php-ini=c no-php-ini=n define=d profile-info=e file=f help=h info=i syntax-check=l "
            "modules=m run=r process-begin=B process-code=R process-file=F process-end=E strip=w server=S "
            "docroot=t version=v zend-extension=z ini rf: rc: re: rz: ri: hide-args=H",
            does={"r": CODE, "B": CODE, "R": CODE, "E": CODE, "f": MODULE, "F": MODULE, "S": MODULE, "a": STDIN,
                  "h": EXIT, "i": EXIT, "m": EXIT, "v": EXIT, "ini": EXIT, "rf": EXIT, "rc": EXIT, "re": EXIT,
                  "rz": EXIT, "ri": EXIT}, runs=INTERPRETER, abbreviations=False)
# Lua 5.4 lua(1): no clusters; -e and -l take their value attached or next; `-` is standard input
_LUA = spec("Lua 5.4 lua(1)", "e:iEl:vW", does={"e": CODE, "i": STDIN}, runs=INTERPRETER, abbreviations=False,
            clusters=False, lone_dash=Opt(does=STDIN, ends=True))
# macOS 14 osascript(1): -e statement (repeatable), -l language, -s flags, -i interactive
_OSASCRIPT = spec("macOS 14 osascript(1)", "e:il:s:", does={"e": CODE, "i": STDIN}, runs=INTERPRETER,
                  abbreviations=False, lone_dash=Opt(does=STDIN, ends=True))

# expect 5.45.4 expect(1): `expect [-dDinN] [-c cmds] [[-[f|b]] cmdfile] [args]`: -c is Tcl code
# (`spawn CMD` runs a program); -f and -b name the script; -i reads commands from standard input
_EXPECT = spec("expect 5.45.4 expect(1)", "c:dD:f:b:inNv", does={"c": CODE, "f": MODULE, "b": MODULE, "i": STDIN,
                                                                  "v": EXIT},
               runs=INTERPRETER, abbreviations=False, lone_dash=Opt(does=STDIN, ends=True))

_INTERPRETERS: dict[str, Spec] = {
    "python": _PYTHON, "python2": _PYTHON, "python3": _PYTHON, "pypy": _PYTHON, "pypy3": _PYTHON,
    **{f"python3.{minor}": _PYTHON for minor in range(6, 16)}, **{f"python2.{minor}": _PYTHON for minor in (6, 7)},
    "perl": _PERL, "ruby": _RUBY, "node": _NODE, "nodejs": _NODE, "php": _PHP, "lua": _LUA,
    **{f"lua5.{minor}": _LUA for minor in range(1, 5)}, "luajit": _LUA, "osascript": _OSASCRIPT,
    "expect": _EXPECT,
}

WRAPPERS: dict[str, Spec] = {**_COREUTILS, **_UTIL_LINUX, **_PRIVILEGE, **_BUILTINS, **_MULTICALL, **LAUNCHERS,
                             **DEV_WRAPPERS}
"""Programs that run the command after them (and su, script: the shell they start): name -> Spec."""

RUNNERS: dict[str, Spec] = {**_RUNNERS, **DEV_RUNNERS}
SHELL_SPECS: dict[str, Spec] = _SHELLS
INTERPRETERS: dict[str, Spec] = _INTERPRETERS
SHELLS = frozenset(_SHELLS) | {"rbash"}

TABLE: dict[str, Spec] = {**WRAPPERS, **RUNNERS, **SHELL_SPECS, **INTERPRETERS}
"""Every program whose command line is read with a table."""

_ = (NEXT, NONE, SCRIPT, SPLIT, SHELL_MODE, ARGV_MODE, APPLET, MODULE, CODE, END, STDIN)  # re-exported names
