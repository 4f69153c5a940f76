"""Programs of a developer's machine that run a command they are given, as data (the shape of
dsl.subjects.optspec): debuggers and benchmarkers, file watchers, terminal multiplexers, project
environments (`uv run`, `poetry run`, `npx`), and remote runners (ssh, docker exec, kubectl exec).

Most are **listed** runners: the runner stays a command of its own (a rule on `ssh` or `docker`
still sees it), and what it runs follows it, nested, with the runner among its `wrappers`
(`ssh host rm -rf /` lists `ssh`, then `rm -rf /` with wrappers `ssh`). A **remote** one runs its
command on another machine or in a container, so that command's directory is unknown (`cwd` "").

Each entry names the manual (and version) it follows. Programs parsed with Go's pflag (docker,
kubectl) or Rust's clap (hyperfine, watchexec, uv) take no abbreviations of long options; pflag's
and clap's `--flag=value` and `-xVALUE` forms are getopt's. An option a table does not list makes
the command dynamic (dsl.subjects.getopt), so a table lists only what its manual documents.
tests/test_dev_runners.py checks the tables against `--help` where the program is installed.
"""

from __future__ import annotations

import dataclasses

from dsl.subjects.optspec import ARGV_MODE, CODE, EXIT, HIDDEN, SCRIPT, SCRIPT_OPERAND, SCRIPTS, SH_WORDS, FILL, spec

_HELP = {"help": EXIT, "version": EXIT}

# --- wrappers: replaced by the command they run (dsl.subjects.wrappers's kind) ---

_WRAPPING = {
    # entr 5.5 entr(1): getopt "acdnprsz" (options end at the utility); -s runs the utility
    # through $SHELL -c. The files it watches come from standard input.
    "entr": spec("entr 5.5 entr(1)", "acdnprsz", does={"s": SCRIPT_OPERAND}, abbreviations=False),
    # systemd 256 run0(1): sudo's kind, getopt_long "+hu:g:D:"; no command: the user's shell
    "run0": spec("systemd 256 run0(1)", "hu:g:D:",
                 "help=h version no-ask-password machine: unit: property: description: slice: slice-inherit user=u "
                 "group=g nice: chdir=D setenv: background: pty pipe shell-prompt-prefix:",
                 does={"h": EXIT, "version": EXIT}, bare_shell=True),
    # glibc 2.31 catchsegv(1) (a script): `catchsegv PROGRAM ARGS`, --help and --version alone
    "catchsegv": spec("glibc 2.31 catchsegv(1)", "", "help version", does=_HELP, abbreviations=False),
    # dbus 1.14 dbus-launch(1): `dbus-launch [--options] [PROGRAM [ARGS]]`, exact option names
    "dbus-launch": spec("dbus 1.14 dbus-launch(1)", "",
                        "sh-syntax csh-syntax auto-syntax binary-syntax close-stderr exit-with-session exit-with-x11 "
                        "autolaunch: config-file: version help", does=_HELP, abbreviations=False),
    # GNU screen 4.9 screen(1): its own loop over clustered letters (`-dmS NAME`), a value attached
    # or the next word; -ls/-list/-wipe/-Logfile/-fn/-fa/-ln are words of their own. -X sends the
    # rest to a running session as a screen command (which may run anything): not known here.
    "screen": spec(
        "GNU screen 4.9 screen(1)", "aAc:dDe:fh:ilLmOp:qQrRs:S:t:T:UvxX",
        "ls list wipe Logfile: fn fa ln help version",
        does={"X": HIDDEN, "v": EXIT, "ls": EXIT, "list": EXIT, "wipe": EXIT, **_HELP},
        ends="X", single_dash_long=True, abbreviations=False),
}

# --- debuggers, benchmarkers, watchers, multiplexers: local, listed ---

_LOCAL = {
    # GNU gdb 13.1 gdb(1), gdb/main.c captured_main_1: getopt_long_only over long options only
    # (one dash or two, unique prefixes). `--args PROG ARGS` ends the options; else the operands
    # are the program and a core file or process id. -ex/-iex/-eiex are gdb commands (which may
    # run a shell: `shell CMD`, `!CMD`): kept in `code`. -x/-ix/-eix name command files.
    "gdb": spec(
        "GNU gdb 13.1 gdb(1)", "",
        "args tui dbx readnow readnever r q quiet silent nh nx n batch batch-silent return-child-result "
        "early-init-command: eix: early-init-eval-command: eiex: init-command: ix: init-eval-command: iex: "
        "command: x: eval-command: ex: version help configuration statistics fullname f directory: d: "
        "data-directory: D: core: c: pid: p: se: symbols: s: exec: e: l: b: baud: tty: interpreter: ui: i: cd: "
        "annotate: write nw nowindows w windows",
        does={"args": ARGV_MODE, "version": EXIT, "help": EXIT, "configuration": EXIT,
              **{name: CODE for name in ("ex", "eval-command", "iex", "init-eval-command", "eiex",
                                         "early-init-eval-command")}},
        ends="args", single_dash_long=True, permute=True, listed=True),
    # hyperfine 1.18 hyperfine(1) (clap): each operand is a command run through the shell
    # (`-N`/`--shell=none`: split into words, no shell); --setup, --prepare, --conclude and
    # --cleanup are commands too; -P VAR MIN MAX and -L VAR LIST fill `{VAR}` in them (dynamic);
    # --shell names another program to read every command: not known here
    "hyperfine": spec(
        "hyperfine 1.18 hyperfine(1)", "w:m:M:r:s:p:C:c:P;;;D:L;;S:iNu:n:hV",
        "warmup=w min-runs=m max-runs=M runs=r setup=s prepare=p conclude=C cleanup=c parameter-scan=P "
        "parameter-step-size=D parameter-list=L shell=S ignore-failure=i style: sort: time-unit=u "
        "export-asciidoc: export-csv: export-json: export-markdown: export-orgmode: show-output output: "
        "input: command-name=n help=h version=V",
        does={"s": SCRIPT, "p": SCRIPT, "C": SCRIPT, "c": SCRIPT, "P": FILL, "L": FILL, "S": HIDDEN,
              "h": EXIT, "V": EXIT},
        runs=SCRIPTS, abbreviations=False, permute=True, listed=True),
    # watchexec 2.1 watchexec(1) (clap, trailing command): the command's words, joined, run by
    # $SHELL (`-n`/`--shell=none`: as a command); --shell names another program: not known here
    "watchexec": spec(
        "watchexec 2.1 watchexec(1)", "w:W:F:c::o:rs:d:pnE:Nqe:f:j:i:vhV",
        "watch=w watch-non-recursive=W watch-file=F clear=c on-busy-update=o restart=r signal=s stop-signal: "
        "stop-timeout: map-signal: debounce=d stdin-quit no-vcs-ignore no-project-ignore no-global-ignore "
        "no-default-ignore no-discover-ignore ignore-nothing postpone=p delay-run: poll:: shell: "
        "emit-events-to: only-emit-events env=E wrap-process: notify=N color: timings quiet=q bell "
        "project-origin: workdir: exts=e filter=f filter-file: filter-prog=j ignore=i ignore-file: fs-events: "
        "no-meta print-events verbose=v log-file:: manual completions: help=h version=V",
        does={"n": ARGV_MODE, "shell": HIDDEN, "h": EXIT, "V": EXIT, "manual": EXIT, "completions": EXIT},
        runs=SH_WORDS, abbreviations=False, listed=True),
    # tmux 3.3a tmux(1): getopt "2c:CDdf:lL:NqS:T:uUvV"; -c runs its shell command; a subcommand
    # (new-session, run-shell, if-shell, send-keys, bind-key, display-popup, formats' #(CMD), ...)
    # may run any command, in ways not read here: listed, dynamic
    "tmux": spec("tmux 3.3a tmux(1)", "2c:CDdf:lL:NqS:T:uUvV", does={"c": SCRIPT, "V": EXIT},
                 abbreviations=False, listed=True, opaque=True),
}

# --- project environments: the command runs with the project's tools on PATH ---
# Each tables the options its manual lists for the subcommand that runs a command; any other
# option makes the command dynamic. None keeps the directory for certain (`--directory`, `--cwd`).

_UV_GLOBAL = ("quiet=q verbose=v color: native-tls offline allow-insecure-host: no-progress directory: project: "
              "config-file: no-config no-cache=n cache-dir: python-preference: no-python-downloads preview help=h "
              "version=V")
_UV_RUN = spec(
    "uv 0.5 uv-run(1)", "qvnhVp:i:f:UP:C:sm",
    "extra: all-extras no-extra: no-dev dev only-dev group: no-group: no-default-groups only-group: all-groups "
    "module=m no-editable exact inexact env-file: no-env-file with: with-editable: with-requirements: isolated "
    "no-sync locked frozen script=s gui-script package: no-project python=p index: default-index: index-url=i "
    "extra-index-url: find-links=f no-index upgrade=U upgrade-package=P reinstall reinstall-package: "
    "index-strategy: keyring-provider: resolution: prerelease: fork-strategy: exclude-newer: no-sources link-mode: "
    "compile-bytecode config-setting=C no-build-isolation no-build-isolation-package: no-build no-build-package: "
    "no-binary no-binary-package: refresh refresh-package: " + _UV_GLOBAL,
    # -m: the operand is a module python runs, no program
    does={"m": HIDDEN, "h": EXIT, "V": EXIT}, abbreviations=False)
_UV_TOOL_RUN = spec("uv 0.5 uv-tool-run(1)", "qvnhVp:i:f:UC:w:",
                    "from: with=w with-editable: with-requirements: isolated python=p index: default-index: "
                    "index-url=i extra-index-url: find-links=f no-index upgrade=U reinstall index-strategy: "
                    "keyring-provider: resolution: prerelease: exclude-newer: link-mode: compile-bytecode "
                    "config-setting=C no-build-isolation no-build no-binary refresh " + _UV_GLOBAL,
                    does={"h": EXIT, "V": EXIT}, abbreviations=False)
_UV = spec("uv 0.5 uv(1)", "qvnhV", _UV_GLOBAL, does={"h": EXIT, "V": EXIT}, abbreviations=False, listed=True,
           subcommands={"run": _UV_RUN, "tool": spec("uv 0.5 uv-tool(1)", "qvnhV", _UV_GLOBAL,
                                                     does={"h": EXIT, "V": EXIT}, abbreviations=False,
                                                     subcommands={"run": _UV_TOOL_RUN})})
# Poetry 1.8 poetry(1) (cleo): global options, then `run CMD ARGS`; pipenv 2024 `pipenv run CMD ARGS`
_POETRY_GLOBAL = "help=h quiet=q verbose=v version=V ansi no-ansi no-interaction=n no-plugins no-cache directory=C project=P"
_POETRY = spec("Poetry 1.8 poetry(1)", "hqvVnC:P:", _POETRY_GLOBAL, does={"h": EXIT, "V": EXIT}, abbreviations=False,
               listed=True, subcommands={"run": spec("Poetry 1.8 poetry-run(1)", "hqvVnC:P:", _POETRY_GLOBAL,
                                                      does={"h": EXIT, "V": EXIT}, abbreviations=False)})
_PIPENV = spec("pipenv 2024.0 pipenv(1)", "hv", "python: pypi-mirror: verbose=v quiet help=h version",
               does={"h": EXIT, "version": EXIT}, abbreviations=False, listed=True,
               subcommands={"run": spec("pipenv 2024.0 pipenv-run(1)", "h", "python: pypi-mirror: system help=h",
                                        does={"h": EXIT}, abbreviations=False)})
# conda 24 conda-run(1) (argparse, REMAINDER: options end at the program; unique prefixes of long
# options); mamba 1.5 and micromamba 1.5 take the same `run [-n NAME | -p PREFIX] CMD`
_CONDA_RUN = spec("conda 24.1 conda-run(1)", "n:p:vh",
                  "name=n prefix=p cwd: no-capture-output live-stream debug-wrapper-scripts dev verbose=v help=h",
                  does={"h": EXIT})
_CONDA = spec("conda 24.1 conda(1)", "hV", "help=h version=V", does={"h": EXIT, "V": EXIT}, listed=True,
              subcommands={"run": _CONDA_RUN})
# Bundler 2.5 bundle-exec(1): `bundle exec [--keep-file-descriptors] [--gemfile=GEMFILE] CMD`
_BUNDLE = spec("Bundler 2.5 bundle(1)", "", "no-color verbose retry: help version", does=_HELP, abbreviations=False,
               listed=True, subcommands={"exec": spec("Bundler 2.5 bundle-exec(1)", "",
                                                      "keep-file-descriptors gemfile: help", does=_HELP,
                                                      abbreviations=False)})
# npm 10 npm-exec(1) and npx(1): `npx [--package=PKG] CMD ARGS`, or `-c 'CMD'` (a shell string); the
# command is a package's program, fetched from the registry when the project lacks it
_NPX = spec("npm 10 npx(1)", "p:c:y", "package=p call=c yes=y no workspace: workspaces include-workspace-root "
            "prefix: help", does={"c": SCRIPT, "help": EXIT}, abbreviations=False, listed=True)
_NPM = spec("npm 10 npm(1)", "hv", "help=h version=v prefix: userconfig: loglevel: silent quiet", does={"h": EXIT, "v": EXIT},
            abbreviations=False, listed=True,
            subcommands={"exec": _NPX, "x": _NPX})
# pnpm 9 pnpm-exec(1): `pnpm exec CMD ARGS` (-c / --shell-mode: the command through a shell);
# `pnpm dlx PKG ARGS` fetches and runs a package's program
_PNPM_EXEC = spec("pnpm 9 pnpm-exec(1)", "rcC:", "recursive=r shell-mode=c parallel dir=C filter: workspace-root "
                  "resume-from: report-summary help", does={"help": EXIT}, abbreviations=False)
_PNPM = spec("pnpm 9 pnpm(1)", "C:hv", "dir=C help=h version=v filter: recursive workspace-root", does={"h": EXIT, "v": EXIT},
             abbreviations=False, listed=True,
             subcommands={"exec": _PNPM_EXEC, "dlx": spec("pnpm 9 pnpm-dlx(1)", "c", "package: shell-mode=c silent help",
                                                            does={"help": EXIT}, abbreviations=False)})
# direnv 2.32 direnv(1): `direnv exec DIR CMD ARGS`, the command with DIR's .envrc loaded
_DIRENV = spec("direnv 2.32 direnv(1)", "", "help version", does=_HELP, abbreviations=False, listed=True,
               subcommands={"exec": spec("direnv 2.32 direnv-exec(1)", "", "", skip=1, abbreviations=False)})

_PROJECT = {
    "uv": _UV, "uvx": dataclasses.replace(_UV_TOOL_RUN, listed=True), "poetry": _POETRY, "pipenv": _PIPENV,
    "conda": _CONDA, "mamba": _CONDA, "micromamba": _CONDA, "bundle": _BUNDLE, "npx": _NPX, "npm": _NPM,
    "pnpm": _PNPM, "direnv": _DIRENV,
}

# --- remote runners: the command runs on another machine or in a container ---

# OpenSSH 9.2 ssh(1) and ssh_config(5): settings that run a local command through the user's
# shell, or that read settings (and so maybe those) from a file the command line names
_SSH_RUNS = r"\s*(ProxyCommand|LocalCommand|PermitLocalCommand|KnownHostsCommand|RemoteCommand|Match|Include" \
            r"|PKCS11Provider|SecurityKeyProvider|ProxyUseFdpass)\b"

_DOCKER_EXEC = spec("docker 28.2 docker-exec(1)", "de:itu:w:",
                    "detach=d detach-keys: env=e env-file: interactive=i privileged tty=t user=u workdir=w help",
                    does={"help": EXIT}, skip=1, abbreviations=False)
_DOCKER_RUN = spec(
    "docker 28.2 docker-run(1)", "a:c:de:h:il:m:p:Pqtu:v:w:",
    "add-host: annotation: attach=a blkio-weight: blkio-weight-device: cap-add: cap-drop: cgroup-parent: cgroupns: "
    "cidfile: cpu-count: cpu-percent: cpu-period: cpu-quota: cpu-rt-period: cpu-rt-runtime: cpu-shares=c cpus: "
    "cpuset-cpus: cpuset-mems: detach=d detach-keys: device: device-cgroup-rule: device-read-bps: "
    "device-read-iops: device-write-bps: device-write-iops: disable-content-trust dns: dns-option: dns-search: "
    "domainname: entrypoint: env=e env-file: expose: gpus: group-add: health-cmd: health-interval: "
    "health-retries: health-start-interval: health-start-period: health-timeout: help hostname=h init "
    "interactive=i io-maxbandwidth: io-maxiops: ip: ip6: ipc: isolation: kernel-memory: label=l label-file: link: "
    "link-local-ip: log-driver: log-opt: mac-address: memory=m memory-reservation: memory-swap: "
    "memory-swappiness: mount: name: network: network-alias: no-healthcheck oom-kill-disable oom-score-adj: pid: "
    "pids-limit: platform: privileged publish=p publish-all=P pull: quiet=q read-only restart: rm runtime: "
    "security-opt: shm-size: sig-proxy stop-signal: stop-timeout: storage-opt: sysctl: tmpfs: tty=t ulimit: "
    "use-api-socket user=u userns: uts: volume=v volume-driver: volumes-from: workdir=w",
    # --entrypoint replaces the image's program (the command's words become its arguments);
    # --health-cmd is a command the container's shell runs
    does={"entrypoint": HIDDEN, "health-cmd": SCRIPT, "help": EXIT}, skip=1, abbreviations=False)
# Docker Compose 2.29 docker-compose-exec(1), docker-compose-run(1): `exec SERVICE CMD`, `run SERVICE CMD`
_COMPOSE_EXEC = spec("Docker Compose 2.29 docker compose exec", "de:iTtu:w:",
                     "detach=d env=e index: interactive=i no-TTY=T privileged tty=t user=u workdir=w dry-run help",
                     does={"help": EXIT}, skip=1, abbreviations=False)
_COMPOSE_RUN = spec("Docker Compose 2.29 docker compose run", "de:il:p:PTtu:v:w:",
                    "build cap-add: cap-drop: detach=d entrypoint: env=e env-from-file: interactive=i label=l name: "
                    "no-TTY=T no-deps publish=p pull: quiet-build quiet-pull remove-orphans rm service-ports=P "
                    "use-aliases user=u volume=v workdir=w dry-run help",
                    does={"entrypoint": HIDDEN, "help": EXIT}, skip=1, abbreviations=False)
_COMPOSE = spec("Docker Compose 2.29 docker compose", "f:p:",
                "ansi: compatibility dry-run env-file: file=f parallel: profile: progress: project-directory: "
                "project-name=p all-resources help version",
                does={"help": EXIT}, abbreviations=False,
                subcommands={"exec": _COMPOSE_EXEC, "run": _COMPOSE_RUN})
_DOCKER = spec(
    "docker 28.2 docker(1)", "c:DH:l:v", "config: context=c debug=D host=H log-level=l tls tlscacert: tlscert: "
    "tlskey: tlsverify version=v help", does={"v": EXIT, "help": EXIT}, abbreviations=False, listed=True, remote=True,
    subcommands={"exec": _DOCKER_EXEC, "run": _DOCKER_RUN, "compose": _COMPOSE,
                 "container": spec("docker 28.2 docker-container(1)", "", "help", does={"help": EXIT},
                                   abbreviations=False, subcommands={"exec": _DOCKER_EXEC, "run": _DOCKER_RUN})})

# kubectl 1.32 kubectl-exec(1) and `kubectl options`: pflag, flags anywhere before `--`
_KUBECTL_GLOBAL = ("as: as-group: as-uid: cache-dir: certificate-authority: client-certificate: client-key: cluster: "
                   "context: disable-compression insecure-skip-tls-verify kubeconfig: log-flush-frequency: "
                   "match-server-version namespace=n password: profile: profile-output: request-timeout: server=s "
                   "tls-server-name: token: user: username: v=v vmodule: warnings-as-errors help")
_KUBECTL_EXEC = spec("kubectl 1.32 kubectl-exec(1)", "c:f:qitn:s:v:",
                     "container=c filename=f pod-running-timeout: quiet=q stdin=i tty=t " + _KUBECTL_GLOBAL,
                     does={"help": EXIT}, skip=1, permute=True, abbreviations=False)

_REMOTE = {
    # OpenSSH 9.2 ssh(1), ssh.c: getopt "1246ab:c:e:fgi:kl:m:no:p:qstvxAB:CD:E:F:GI:J:KL:MNO:P:Q:R:S:TVw:W:XYy",
    # read again once after the destination (`ssh host -p 22 CMD`); the words after it are joined
    # with spaces and run by the remote user's shell; none: that shell reads standard input.
    # -N, -O, -W, -G, -Q, -V and -s (a subsystem) run no command; -o with a setting that runs a
    # local command (ProxyCommand, LocalCommand, ...) and -F (a config file that may) are not known.
    "ssh": spec("OpenSSH 9.2 ssh(1)", "1246ab:c:e:fgi:kl:m:no:p:qstvxAB:CD:E:F:GI:J:KL:MNO:P:Q:R:S:TVw:W:XYy",
                does={"N": EXIT, "O": EXIT, "W": EXIT, "G": EXIT, "Q": EXIT, "V": EXIT, "s": EXIT, "F": HIDDEN},
                hides={"o": _SSH_RUNS}, runs=SH_WORDS, skip=1, reopen=1, abbreviations=False, bare_shell=True,
                listed=True, remote=True),
    "docker": _DOCKER,
    "kubectl": spec("kubectl 1.32 kubectl(1)", "n:s:v:", _KUBECTL_GLOBAL, does={"help": EXIT}, abbreviations=False,
                    listed=True, remote=True, subcommands={"exec": _KUBECTL_EXEC}),
}

DEV_WRAPPERS = _WRAPPING
"""Wrappers of a developer's machine (entr, screen): name -> Spec, merged into WRAPPERS."""

DEV_RUNNERS = {**_LOCAL, **_PROJECT, **_REMOTE}
"""Listed runners of a developer's machine (gdb, hyperfine, ssh, docker, ...): name -> Spec."""
