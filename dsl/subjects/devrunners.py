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

from dsl.subjects.optspec import ARGV_MODE, CODE, EXIT, HIDDEN, SCRIPT, SCRIPT_OPERAND, SCRIPTS, SH_WORDS, FILL, spec

_HELP = {"help": EXIT, "version": EXIT}

# --- wrappers: replaced by the command they run (dsl.subjects.wrappers's kind) ---

_WRAPPING = {
    # entr 5.5 entr(1): getopt "acdnprsz" (options end at the utility); -s runs the utility
    # through $SHELL -c. The files it watches come from standard input.
    "entr": spec("entr 5.5 entr(1)", "acdnprsz", does={"s": SCRIPT_OPERAND}, abbreviations=False),
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
        "data-directory: D: core: c: pid: p: se: symbols: s: exec: e: l: b: baud: tty: t: interpreter: i: cd: "
        "write nw nowindows w windows",
        does={"args": ARGV_MODE, "version": EXIT, "help": EXIT, "configuration": EXIT,
              **{name: CODE for name in ("ex", "eval-command", "iex", "init-eval-command", "eiex",
                                         "early-init-eval-command")}},
        ends="args", single_dash_long=True, listed=True),
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

DEV_RUNNERS = {**_LOCAL, **_REMOTE}
"""Listed runners of a developer's machine (gdb, hyperfine, ssh, docker, ...): name -> Spec."""
