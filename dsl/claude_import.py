"""Translate a Claude Code settings file's `permissions` block into a countersign policy.

    from dsl.claude_import import import_settings
    result = import_settings(json.load(open(".claude/settings.json")), source=".claude/settings.json")
    result.text    # the .policy text: loads and checks clean
    result.notes   # rules that could not be translated exactly, and what was done instead

Claude Code decides a tool call with three lists of rules: `deny`, then `ask`, then `allow`; the
first list with a matching rule decides, and a call no rule covers asks a person. A rule is `Tool`
or `Tool(specifier)`. The translation keeps that precedence (countersign's own: deny beats ask
beats allow; `default ask`) and translates what each specifier *means*, through the normalized
subjects of the policy language (docs/claude-code-import.md has the full table):

* `Bash(...)` becomes a condition over `shell(args.command)`, the simple commands of the string
  (after `&&`, `||`, `;`, `|`, newlines, `$(...)`, backticks, `bash -c`, `xargs`, ...). A deny or
  ask applies when ANY command matches; the allow rules are gathered in one rule that applies
  only when ALL commands match some allowed pattern. `npm run test:*` (legacy prefix) and
  `npm run test *` are a prefix of the command's words, `npm run build` is the exact words; a deny
  compares the program's basename, the normalized flag set (`-rf` = `-fr` = `-r -f`) and the
  positional words, and ignores wrappers (`sudo`, `timeout`, ...) and `VAR=x` prefixes; an allow
  compares the words as written and refuses wrappers, assignments and redirects it did not name.
* `Read(...)` / `Edit(...)` become `path(...) glob ...` over the tools' path arguments, with the
  pattern anchored as Claude Code documents (`//abs`, `~/home`, `/settings-root`, relative to the
  working directory) and gitignore's rules (a pattern without a slash matches at any depth; a
  matched directory covers its contents). Read rules cover Read, Grep, Glob, LS and NotebookRead;
  Edit rules cover Edit, Write, MultiEdit and NotebookEdit. A Read or Edit *deny* is also applied
  to the file arguments (Read) or redirect targets and written files (Edit) of Bash commands.
* `WebFetch(domain:x)` becomes `url(args.url).host == "x"` (`domain:*.x` a host glob that does not
  cover the apex); `mcp__server` and `mcp__server__*` every tool of the server; bare names the tool.

Nothing is dropped silently. A rule that cannot be translated exactly gets a note (in `notes` and
as a comment in the policy): an allow is dropped (fail closed: the call asks instead), a deny or
ask is widened to the broadest safe rule (the whole tool, or a raw-text match besides the
normalized one). Every generated rule carries the original rule in a comment next to it.

`hook_context(payload)` builds the `context` (cwd, home) for a Claude Code PreToolUse hook input.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from dsl import subjects
from dsl.subjects.shell import parse_shell_pattern
from dsl.values import EvalError

__all__ = ["ImportResult", "Note", "SettingsError", "hook_context", "import_file", "import_settings"]

# Claude Code's file tools, by the argument that names the file. Read rules apply to the tools
# that read files, Edit rules to the tools that change them (Claude Code's documentation: "Edit
# rules apply to all built-in tools that edit files"; Read rules are applied "best effort" to
# Grep, Glob and LS). Grep and Glob search a directory: `path`, or the working directory.
READ_TOOLS = ("Read", "NotebookRead", "Grep", "Glob", "LS")
EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
PATH_ARGUMENT = {
    "Read": "file_path", "NotebookRead": "notebook_path", "LS": "path", "Grep": "path?", "Glob": "path?",
    "Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path",
}
WRAPPERS = frozenset(subjects.WRAPPERS)  # sudo, timeout, nice, env, ...: they run the command after them
# Programs whose operands are files they write (for an Edit deny applied to Bash).
WRITERS = ("tee", "cp", "mv", "rm", "ln", "install", "touch", "truncate", "chmod", "chown", "rsync", "dd")
KEYWORDS = frozenset(
    "policy default group home allow deny ask when reason approvers from decisions timeout remember else id "
    "and or not in startswith endswith contains glob under any all true false null".split()
)

# shell() does not list a statement that only assigns (`PATH=/tmp/evil; ls`), yet it changes what
# the commands after it run. Until it does, an allow refuses strings that assign these variables.
SENSITIVE_VARIABLES = ("PATH", "HOME", "IFS", "CDPATH", "ENV", "BASH_ENV", "PROMPT_COMMAND", "PS4",
                       "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES")
ASSIGNMENT_GUARD = "not (" + "\n          or ".join(
    f'args.command glob "{name}[+=]*" or args.command glob "*[\\t\\n ;&|(){{}}]{name}[+=]*"' for name in SENSITIVE_VARIABLES
) + ")"
_STAR = "CSWILDCARD"  # stands for an unescaped `*` of a Bash pattern while the pattern is parsed as shell
_SELECTOR = re.compile(r"[A-Za-z0-9_*?][A-Za-z0-9_*?.\-]*")
_RULE = re.compile(r"([^()\s]+)(?:\((.*)\))?", re.DOTALL)
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")


class SettingsError(ValueError):
    """The input is not a Claude Code settings object (or its permissions block is malformed)."""


@dataclass(frozen=True)
class Note:
    """A rule (or setting) that was not translated exactly, and what was done instead."""

    where: str  # "deny[3]", "allow[0]", "defaultMode", ...
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.where} {self.rule}: {self.message}" if self.rule else f"{self.where}: {self.message}"


@dataclass
class ImportResult:
    text: str
    notes: list[Note] = field(default_factory=list)


# --- policy text helpers ------------------------------------------------------------------------


def q(text: str) -> str:
    """A policy string literal."""
    return json.dumps(text, ensure_ascii=False)


def qlist(items: Iterable[str]) -> str:
    return "[" + ", ".join(q(i) for i in items) + "]"


def selector(name: str) -> str:
    if _SELECTOR.fullmatch(name) and name not in KEYWORDS:
        return name
    return q(name)


def shown(rule: str) -> str:
    """The original rule for a comment: as written, or JSON-escaped when it holds line breaks or
    control characters."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or ch in "\u2028\u2029\x85" for ch in rule):
        return q(rule)
    return rule


def fglob(text: str) -> str:
    """Escape literal text for the language's string `glob` (fnmatch): `*`, `?`, `[` stand for
    themselves."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def star_glob(word: str) -> str:
    """A Bash-pattern word with wildcard placeholders → a string glob (`*` any run)."""
    return _STAR.join(fglob(part) for part in word.split(_STAR)).replace(_STAR, "*")


# --- rules --------------------------------------------------------------------------------------


@dataclass
class Rule:
    effect: str  # deny | ask | allow
    index: int
    text: str
    tool: str = ""
    spec: str | None = None

    @property
    def where(self) -> str:
        return f"{self.effect}[{self.index}]"


@dataclass
class Out:
    """One statement of the generated policy (or, with `effect` None, only comments), before it is
    rendered: which settings rules it translates (`sources`, quoted above it) and the notes made."""

    effect: str | None
    tools: list[str]
    cond: str | None
    sources: list[Rule]
    comments: list[str] = field(default_factory=list)
    id: str | None = None
    reason: str | None = None
    custom: Any = None  # renders the statement itself (the multi-line Bash allow)
    covered_by: str = ""
    quoted: bool = True  # quote the sources above the statement (the first of several for one rule)
    preface: list[str] = field(default_factory=list)  # plain comment lines after the quoted sources


def _covers(outer: str, inner: str) -> bool:
    """Does the selector `outer` match every tool the selector `inner` matches (as far as provable)?"""
    from dsl.analysis import covers

    return covers(outer, inner)


def simplify(outs: list[Out]) -> None:
    """Merge translations that came out identical, and drop the tools of a rule that another one
    makes pointless, so that the policy checks clean: the same (effect, tools, condition) twice
    becomes one rule quoting both originals; a tool that an unconditional rule of the same effect
    (earlier), or a stronger one, or one with the same condition (deny beats ask beats allow)
    already decides is removed from the weaker or later rule."""
    stronger = {"allow": ("deny", "ask", "allow"), "ask": ("deny", "ask"), "deny": ("deny",)}
    seen: dict[tuple, Out] = {}
    for o in outs:
        if o.effect is None or o.custom is not None:
            continue
        key = (o.effect, tuple(o.tools), o.cond)
        first = seen.get(key)
        if first is None:
            seen[key] = o
            continue
        first.sources += o.sources
        first.comments += o.comments
        first.quoted = first.quoted or o.quoted
        o.sources, o.comments, o.effect = [], [], None
    live = [o for o in outs if o.effect is not None]
    for i, o in enumerate(live):
        for other in live:
            if other is o or not other.tools or other.effect not in stronger[o.effect]:
                continue
            if other.cond is not None and other.cond != o.cond:
                continue
            later_twin = other.effect == o.effect and other.cond == o.cond and live.index(other) > i
            # (of two rules that cover each other's tool, the earlier one keeps it)
            kept = [t for t in o.tools
                    if not any(_covers(s, t) and not (later_twin and _covers(t, s)) for s in other.tools)]
            if len(kept) < len(o.tools):
                what = ", ".join(shown(r.text) for r in other.sources) or other.id or other.effect
                o.covered_by = f"{other.effect} {what} already decides every call of {', '.join(t for t in o.tools if t not in kept)}"
                o.tools = kept


class _Importer:
    def __init__(self, *, root: str | None, home: str | None, bash_file_rules: bool):
        self.root = root.rstrip("/") or "/" if root else None
        self.home = home
        self.bash_file_rules = bash_file_rules
        self.notes: list[Note] = []
        self.ids: set[str] = set()

    def note(self, rule: Rule | None, message: str, where: str | None = None) -> str:
        n = Note(where or (rule.where if rule else ""), rule.text if rule else "", message)
        self.notes.append(n)
        return message

    def new_id(self, base: str) -> str:
        candidate, n = base, 1
        while candidate in self.ids:
            n += 1
            candidate = f"{base}.{n}"
        self.ids.add(candidate)
        return candidate

    # --- parsing the settings ---------------------------------------------------------------

    def rules(self, permissions: dict) -> dict[str, list[Rule]]:
        out: dict[str, list[Rule]] = {"deny": [], "ask": [], "allow": []}
        for effect in ("deny", "ask", "allow"):
            entries = permissions.get(effect, [])
            if entries is None:
                continue
            if not isinstance(entries, list):
                raise SettingsError(f"permissions.{effect} must be a list of rules, not {type(entries).__name__}")
            seen: dict[str, int] = {}
            for i, entry in enumerate(entries):
                rule = Rule(effect, i, entry if isinstance(entry, str) else json.dumps(entry))
                if not isinstance(entry, str):
                    self.note(rule, "not a string, so not a rule; ignored (Claude Code ignores it too)")
                    continue
                text = entry.strip()
                if text.startswith("//") or text.startswith("#"):
                    rule.tool = "//"  # a comment, not a rule: kept as a comment in its place
                    out[effect].append(rule)
                    continue
                if not text:
                    self.note(rule, "an empty rule; ignored")
                    continue
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    self.note(rule, "holds a lone surrogate, which is not valid Unicode; ignored" +
                              (" (an allow is never widened)" if effect == "allow" else "; the whole tool is not known, so nothing could be widened"))
                    continue
                m = _RULE.fullmatch(text)
                if not m:
                    lead = re.match(r"[A-Za-z][A-Za-z0-9_\-]*", text)
                    if effect == "allow" or not lead:
                        self.note(rule, "not of the form Tool or Tool(specifier); " + (
                            "dropped (fail closed)" if effect == "allow" else "it names no tool, so nothing could be widened; ignored"))
                        continue
                    self.note(rule, f"not of the form Tool or Tool(specifier); widened to every call of {lead.group(0)}")
                    rule.tool, rule.spec = lead.group(0), None
                    out[effect].append(rule)
                    continue
                name = m.group(1)
                if ("*" in name or "?" in name) and not re.fullmatch(r"mcp__[^*?]+__\*", name):
                    # Claude Code knows one wildcard in a tool name: mcp__server__*. A selector with
                    # `*` or `?` is a glob here, so an allow of it would allow other tools.
                    if effect == "allow":
                        self.note(rule, "a tool name with a wildcard (other than mcp__server__*) is not a Claude Code tool; "
                                        "dropped (fail closed)")
                        continue
                    self.note(rule, "a tool name with a wildcard (other than mcp__server__*); matched as a glob over tool "
                                    "names, which is wider")
                if text in seen:
                    self.note(rule, f"listed twice (first as {effect}[{seen[text]}]); translated once")
                    rule.text, rule.tool = f"{text}  (listed twice: translated as {effect}[{seen[text]}])", "//"
                    out[effect].append(rule)
                    continue
                seen[text] = i
                rule.text, rule.tool, rule.spec = text, m.group(1), m.group(2)
                out[effect].append(rule)
        return out

    # --- the whole policy -------------------------------------------------------------------

    def run(self, settings: Any, source: str | None, name: str | None) -> str:
        if not isinstance(settings, dict):
            raise SettingsError("a Claude Code settings file is a JSON object")
        permissions = settings.get("permissions")
        if permissions is None:
            if any(k in settings for k in ("allow", "deny", "ask")):
                permissions = settings  # the permissions block on its own
            else:
                permissions = {}
                self.note(None, "the settings have no permissions block: every call asks a person", "permissions")
        if not isinstance(permissions, dict):
            raise SettingsError("permissions must be a JSON object")
        if permissions is not settings:
            for key in ("allow", "deny", "ask"):
                if key in settings:  # beside the permissions block, where Claude Code does not read rules
                    self.note(None, f"a top-level '{key}' list beside the permissions block is not read (Claude Code reads "
                              f"rules only inside permissions); move it into permissions", key)
        for key in permissions:
            if key not in ("allow", "deny", "ask", "defaultMode", "additionalDirectories"):
                self.note(None, f"'{key}' is not translated (it is not a rule list)", f"permissions.{key}")
        rules = self.rules(permissions)
        mode = permissions.get("defaultMode")
        dirs = permissions.get("additionalDirectories") or []
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise SettingsError("permissions.additionalDirectories must be a list of strings")

        policy_name = name or (f"claude-settings {source}" if source else "claude-settings")
        decls = [f"policy {q(policy_name)}"]
        if self.home:
            decls.append(f"home {q(self.home)}")
        decls.append(self.default(mode))
        if dirs:
            decls.append("# additionalDirectories (working directories besides context.cwd): " + ", ".join(shown(d) for d in dirs))
            if mode != "acceptEdits":
                self.note(None, "recorded in a comment; they matter only to the acceptEdits mode here "
                                "(countersign does not auto-approve reads in working directories)", "additionalDirectories")

        sections: list[tuple[str, list[Out]]] = []
        for effect in ("deny", "ask"):
            outs: list[Out] = []
            for rule in rules[effect]:
                outs += [Out(None, [], None, [rule])] if rule.tool == "//" else self.broad_rule(rule)
            sections.append((effect, outs))
            if effect == "deny" and self.bash_file_rules:
                extra = [o for rule in rules["deny"] if rule.tool != "//" for o in self.bash_file_rule(rule)]
                sections.append(("deny: the same Read/Edit denies, applied to the files Bash commands name", extra))
        sections.append(("allow", self.allow_section(rules["allow"]) + self.mode_rules(mode, dirs)))
        simplify([o for _, outs in sections for o in outs])

        body: list[str] = []
        for title, outs in sections:
            rendered = [self.render(o) for o in outs]
            if rendered:
                body.append(f"# --- {title} " + "-" * max(3, 94 - len(title)))
                for lines in rendered:
                    body.extend(lines)
        header = [
            f"# Generated by `countersign policy import claude-settings` from {source or 'a settings object'}.",
            "# Claude Code decides deny, then ask, then allow; a call that no rule covers asks a person.",
            "# Each original rule is quoted in a comment (\"# deny[2] Bash(rm -rf:*)\") next to its translation.",
            "# See docs/claude-code-import.md for the translation and where it deliberately differs.",
        ]
        notes = [f"#   {shown(str(n))}" for n in self.notes]
        if notes:
            header += ["#", f"# {len(notes)} note{'s' if len(notes) != 1 else ''} (rules not translated exactly, and what was done instead):"] + notes
        return "\n".join(header + [""] + decls + [""] + body).rstrip() + "\n"

    def render(self, o: Out) -> list[str]:
        lines = [f"# {r.where} {shown(r.text)}" for r in o.sources] if o.quoted else []
        lines += [f"# {c}" for c in o.preface]
        lines += [f"# NOTE {c}" for c in o.comments]
        if o.effect is None:
            return lines
        if not o.tools:
            return lines + [f"# (no rule: {o.covered_by})", ""]
        if o.covered_by:
            lines.append(f"# (in part: {o.covered_by})")
        if o.custom is not None:
            return lines + o.custom(o.tools) + [""]
        head = f"{o.effect} {', '.join(selector(t) for t in o.tools)}"
        lines.append(f"{head} when {o.cond}" if o.cond is not None else head)
        reason = o.reason
        if reason is None and o.effect in ("deny", "ask"):
            verb = {"deny": "deny", "ask": "ask about"}[o.effect]
            listed = ", ".join(r.text for r in o.sources)
            reason = f"The Claude Code settings {verb} this call ({o.effect} rule{'s' if len(o.sources) > 1 else ''} {listed})."
        if reason is not None:
            lines.append(f"  reason {q(reason)}")
        lines.append(f"  id {q(self.new_id(o.id or o.sources[0].where))}")
        return lines + [""]

    def default(self, mode: Any) -> str:
        if mode is None or mode == "default":
            return 'default ask "No rule of the Claude Code settings covers this call; a person decides."'
        if mode == "dontAsk":
            return ('default deny "The Claude Code settings (dontAsk mode) deny every call they do not allow; '
                    'ask the user to allow it."')
        if mode == "bypassPermissions":
            self.note(None, "bypassPermissions is not carried over: a call no rule covers asks a person instead of "
                            "running (fail closed)", "defaultMode")
        elif mode == "plan":
            self.note(None, "plan mode (analysis only) is a session state, not a rule; a call no rule covers asks a person",
                      "defaultMode")
        elif mode == "acceptEdits":
            pass  # translated as allow rules (mode_rules)
        elif mode == "auto":
            self.note(None, "auto mode (a classifier decides) cannot be translated; a call no rule covers asks a person",
                      "defaultMode")
        else:
            self.note(None, f"unknown mode {mode!r}; a call no rule covers asks a person", "defaultMode")
        return 'default ask "No rule of the Claude Code settings covers this call; a person decides."'

    def mode_rules(self, mode: Any, dirs: list[str]) -> list[Out]:
        if mode != "acceptEdits":
            return []
        self.note(None, "acceptEdits: file edits inside the working directories are allowed; the file-system "
                        "Bash commands newer versions also accept are not (fail closed)", "defaultMode")
        roots = ["context.cwd"] + [q(d) for d in dirs]
        mode_rule = Rule("defaultMode", 0, "acceptEdits: edits inside the working directories (context.cwd and additionalDirectories)")
        outs = []
        for n, (tools, arg) in enumerate(((["Edit", "Write", "MultiEdit"], "file_path"), (["NotebookEdit"], "notebook_path"))):
            inside = " or ".join(f"path(args.{arg}) under {r}" for r in roots)
            outs.append(Out("allow", tools, inside, [mode_rule], id="defaultMode.acceptEdits", quoted=n == 0,
                            reason="Claude Code defaultMode acceptEdits accepts edits in the working directories."))
        return outs

    # --- deny and ask -------------------------------------------------------------------------

    def broad_rule(self, rule: Rule) -> list[Out]:
        """A deny or ask rule: never narrower than Claude Code's reading of it."""
        tool, spec = rule.tool, rule.spec
        whole = spec is None or spec.strip() == "" or (spec.strip() == "*" and tool not in READ_TOOLS + EDIT_TOOLS)
        notes = []
        if spec is not None and spec.strip() == "":
            notes.append(self.note(rule, "an empty specifier; read as the whole tool"))
        if tool.startswith("mcp__"):
            if spec is not None and not whole:
                notes.append(self.note(rule, "MCP rules take no specifier; widened to every call of the tool"))
            return [Out(rule.effect, self.mcp_selectors(tool), None, [rule], notes)]
        if whole:
            return [Out(rule.effect, list(self.tool_family(tool)), None, [rule], notes)]
        if tool == "Bash":
            return [Out(rule.effect, ["Bash"], self.bash_broad(rule, spec), [rule], notes)]
        if tool in READ_TOOLS + EDIT_TOOLS:
            return self.path_rules(rule, broad=True)
        if tool == "WebFetch":
            cond = self.webfetch(rule, spec)
            if cond is None:
                notes.append(self.note(rule, "not a domain: rule; widened to every WebFetch call"))
            return [Out(rule.effect, ["WebFetch"], cond, [rule], notes)]
        cond = self.named_spec(tool, spec)
        if cond is None:
            notes.append(self.note(rule, f"the specifier of {tool} has no documented meaning; widened to every {tool} call"))
        return [Out(rule.effect, [tool], cond, [rule], notes)]

    @staticmethod
    def tool_family(tool: str) -> tuple[str, ...]:
        """The tools a bare rule names: Read and Edit cover their families."""
        if tool == "Read":
            return READ_TOOLS
        if tool == "Edit":
            return EDIT_TOOLS
        return (tool,)

    @staticmethod
    def mcp_selectors(tool: str) -> list[str]:
        parts = tool.split("__")
        if len(parts) == 2 or (len(parts) == 3 and parts[2] == ""):  # mcp__server: every tool of it
            return [f"mcp__{parts[1]}__*"]
        return [tool]

    def named_spec(self, tool: str, spec: str) -> str | None:
        """Specifiers of other tools with a documented meaning: Task/Agent(subagent type),
        SlashCommand(/name) and its legacy prefix form."""
        spec = spec.strip()
        if tool in ("Task", "Agent"):
            return f"args.subagent_type == {q(spec)}"
        if tool == "SlashCommand":
            if spec.endswith(":*"):
                prefix = spec[:-2]
                return f"(args.command == {q(prefix)} or args.command startswith {q(prefix + ' ')})"
            if "*" not in spec:
                return f"args.command == {q(spec)}"
        return None

    def webfetch(self, rule: Rule, spec: str) -> str | None:
        spec = spec.strip()
        if not spec.startswith("domain:"):
            return None
        domain = spec[len("domain:"):].strip()
        wildcard = domain.startswith("*.")
        bare = domain[2:] if wildcard else domain
        try:
            host = subjects.parse_url(f"https://{bare}/").host
        except EvalError:
            return None
        if host != bare.rstrip(".").lower():
            pass  # IDNA: the rule names the host as the URL parser spells it
        if "*" in host or (wildcard and not host):
            return None
        return f"url(args.url).host glob {q('*.' + fglob(host))}" if wildcard else f"url(args.url).host == {q(host)}"

    # --- paths ------------------------------------------------------------------------------

    def path_pattern(self, rule: Rule, spec: str, broad: bool) -> tuple[str | None, list[str]]:
        """The path glob (for `path(x) glob`) that a Read/Edit specifier means, or None when an
        allow cannot be translated; and the notes made."""
        notes: list[str] = []
        raw = spec.strip()
        if raw.startswith("!"):
            return None, [self.note(rule, "a negated pattern has no meaning in a permission rule")]
        if "$" in raw or "`" in raw:
            return None, [self.note(rule, "a pattern with $ or ` cannot be anchored")]
        if "[" in raw or "\\" in raw:
            if not broad:
                return None, [self.note(rule, "character classes and escapes are not supported by path globs; dropped (fail closed)")]
            raw = re.sub(r"\[[^\]]*\]", "?", raw.replace("\\", ""))
            notes.append(self.note(rule, "character classes widened to '?' (one character)"))
        if raw == "*" and broad:
            notes.append(self.note(rule, "Tool(*) read as the whole tool (wider than gitignore's reading, everything under the working directory)"))
            return "", notes
        if raw.startswith("//"):
            anchor, rest = "/", raw[2:].lstrip("/")
        elif raw == "~" or raw.startswith("~/"):
            anchor, rest = "~", raw[2:]
        elif raw.startswith("/"):
            if self.root:
                anchor, rest = self.root, raw[1:]
            else:
                anchor, rest = ".", raw[1:]
                notes.append(self.note(rule, "/path is relative to the settings' root, which is not known here; anchored at "
                                             "the working directory (context.cwd) instead (pass --root to fix it)"))
        elif raw.startswith("~"):
            return None, [self.note(rule, "another user's home (~name) is not known")]
        else:
            anchor, rest = "", raw[2:] if raw.startswith("./") else raw
        directory_only = rest.endswith("/")
        rest = rest.rstrip("/")
        if rest in ("", "."):
            rest = "**"
        # gitignore: a pattern with no slash (after the anchor) matches at any depth below it.
        if anchor == "":
            anchored = ("**/" + rest) if "/" not in rest else rest
        elif anchor == ".":
            anchored = "./" + rest
        elif anchor == "~":
            anchored = "~/" + ("**/" + rest if "/" not in rest else rest)
        elif anchor == "/":
            anchored = "/" + ("**/" + rest if "/" not in rest else rest)
        else:  # an absolute root
            anchored = anchor.rstrip("/") + "/" + ("**/" + rest if "/" not in rest else rest)
        segments: list[str] = []
        for seg in anchored.split("/"):  # `**/**` is `**`
            if not (seg == "**" and segments and segments[-1] == "**"):
                segments.append(seg)
        anchored = "/".join(segments)
        # A matched directory covers everything inside it (gitignore excludes a directory's contents).
        if directory_only and not broad:
            anchored = anchored + "/*/**"  # contents only: a file of that name is not a directory
        elif segments[-1] != "**":
            anchored += "/**"
        return anchored, notes

    def path_rules(self, rule: Rule, broad: bool) -> list[Out]:
        tool, spec = rule.tool, rule.spec or ""
        tools = self.tool_family(tool)
        if broad and tool not in ("Read", "Edit"):
            # A deny or ask on one edit (read) tool: Claude Code documents path rules for Read and
            # Edit only; widened to the whole family.
            tools = EDIT_TOOLS if tool in EDIT_TOOLS else READ_TOOLS
        pattern, notes = self.path_pattern(rule, spec, broad)
        if tool not in ("Read", "Edit"):
            notes.append(self.note(rule, f"{tool}(...) path rules are not documented (Claude Code documents Read and Edit); "
                                         + ("applied to every " + ("edit" if tool in EDIT_TOOLS else "read") + " tool" if broad
                                            else f"translated as a path rule for {tool} only")))
        if pattern is None:
            if broad:
                return [Out(rule.effect, list(tools), None, [rule], notes)]
            return [Out(None, [], None, [rule], notes + ["dropped: an allow that cannot be translated exactly is left out (fail closed)"])]
        if pattern == "":
            return [Out(rule.effect, list(tools), None, [rule], notes)]
        groups: dict[str, list[str]] = {}
        for t in tools:
            groups.setdefault(PATH_ARGUMENT[t], []).append(t)
        return [Out(rule.effect, names, self.path_condition(arg, pattern), [rule], notes if n == 0 else [],
                    id=rule.where + ("" if n == 0 else f".{n + 1}"), quoted=n == 0)
                for n, (arg, names) in enumerate(groups.items())]

    @staticmethod
    def path_condition(arg: str, pattern: str) -> str:
        if arg.endswith("?"):  # Grep, Glob: the directory searched, the working directory by default
            name = arg[:-1]
            return (f"((exists(args.{name}) and args.{name} != null and path(args.{name}) glob {q(pattern)})"
                    f" or ((not exists(args.{name}) or args.{name} == null) and path(context.cwd) glob {q(pattern)}))")
        return f"path(args.{arg}) glob {q(pattern)}"

    def bash_file_rule(self, rule: Rule) -> list[Out]:
        """A Read or Edit deny applied to Bash: the files a command reads (its operands and
        redirects) or writes (redirects, and the operands of programs that write files)."""
        if rule.tool not in READ_TOOLS + EDIT_TOOLS or rule.spec is None or rule.spec.strip() in ("", "*"):
            return []
        saved = len(self.notes)
        pattern, _ = self.path_pattern(rule, rule.spec, broad=True)
        del self.notes[saved:]  # already noted with the rule itself
        if not pattern:
            return []
        # This rule widens Claude Code's (which never looks into Bash commands), so it applies only
        # where it can be evaluated: to words path() reads as a path (not an expansion, another
        # user's home or a Windows path), with the context they need (a POSIX cwd for relative
        # words and patterns, a home for ~).
        cwd_ok = 'exists(context.cwd) and context.cwd startswith "/" and not (context.cwd contains "\\\\")'
        home_ok = None if self.home else 'exists(context.home) and context.home startswith "/"'
        word = (f'(w startswith "/" or (w startswith "~"{" and " + home_ok if home_ok else ""}) '
                f'or (not (w startswith "~") and {cwd_ok}))')
        usable = f'w != "" and not (w glob "*[$`\\\\]*") and not (w glob "~[!/]*") and not (w glob "[A-Za-z]:*") and {word}'
        test = f"{usable} and path(w) glob {q(pattern)}"
        guard = cwd_ok if not pattern.startswith(("/", "~")) else home_ok if pattern.startswith("~") else None
        if rule.tool in READ_TOOLS:
            what = "reads"
            cond = f"(any c in shell(args.command): (any w in c.args: {test}) or (any w in c.redirects: {test}))"
        else:
            what = "writes"
            cond = (f"(any c in shell(args.command): (any w in c.redirects: {test})"
                    f" or (c.program in {qlist(WRITERS)} and (any w in c.args: {test}))"
                    f" or (c.program == \"sed\" and c.flags contains \"in-place\" and (any w in c.args: {test})))")
        if guard:
            cond = f"{guard} and {cond}"
        reason = f"The Claude Code settings deny this file ({rule.where} {rule.text}); this command {what} it."
        return [Out("deny", ["Bash"], cond, [rule], id=rule.where + ".bash", reason=reason,
                    preface=[f"(the same deny, for the files a Bash command {what})"])]

    # --- Bash ---------------------------------------------------------------------------------

    @staticmethod
    def bash_split(spec: str) -> tuple[str, str]:
        """(body, mode) of a Bash specifier. mode: "exact" (the words as written), "prefix" (the
        words, then anything), "open" (the last word is a glob, then anything)."""
        s = spec.strip()
        if s.endswith(":*"):  # legacy prefix syntax; the documentation: equivalent to " *"
            return s[:-2].rstrip(), "prefix"
        if s.endswith(" *"):
            return s[:-2].rstrip(), "prefix"
        if s.endswith("*") and not s.endswith("\\*"):
            return s, "open"
        return s, "exact"

    @staticmethod
    def mark_stars(body: str) -> str:
        """Unescaped `*` → the placeholder; `\\*` → a literal star."""
        return re.sub(r"\\\*|\*", lambda m: "*" if m.group(0) == "\\*" else _STAR, body)

    def bash_parse(self, rule: Rule, body: str, mode: str) -> tuple[list[subjects.Command] | None, str, str | None]:
        """The commands of a pattern body; a dangling quote at the end of a prefix pattern
        (`node -e '` from `Bash(node -e ':*)`) is dropped with a note."""
        marked = self.mark_stars(body)

        def commands(text: str) -> list[subjects.Command]:
            # a statement that only assigns is not a command a pattern can name
            # a prefix (`python` of `python:*`) is not a shell reading standard input
            return [c for c in parse_shell_pattern(text) if c.argv]

        try:
            return commands(marked), body, None
        except EvalError:
            pass
        if mode != "exact":
            stripped = re.sub(r"""\s*["']$""", "", body)
            if stripped != body:
                try:
                    return commands(self.mark_stars(stripped)), stripped, (
                        "the pattern ends inside a quote; translated as the words before the quote (any quoted argument may follow)")
                except EvalError:
                    pass
        return None, body, None

    def bash_broad(self, rule: Rule, spec: str) -> str | None:
        """A deny/ask condition over shell(args.command), or None for the whole tool."""
        body, mode = self.bash_split(spec)
        if body in ("", "*"):
            return None
        raws = [self.raw_condition(body, mode)]
        # `:*` in the middle is not the legacy syntax (only a final `:*` is); Claude Code reads it
        # as ':' and a wildcard, which hardly ever matches. The evident intent is ' *' (any words):
        # a deny is widened to both readings.
        if re.search(r":\*(\s|$)", body):
            self.note(rule, "':*' in the middle of a pattern is not Claude Code's prefix syntax (only at the end); "
                            "matched both as Claude Code reads it and as ' *' (any words), which is wider")
            body = re.sub(r":\*(?=\s|$)", " *", body)
            raws.append(self.raw_condition(body, mode))
        raw = " or ".join(raws)
        commands, body, repair = self.bash_parse(rule, body, mode)
        if repair:
            self.note(rule, repair)
        commands = [c for c in commands or [] if not c.nested]  # `xargs` alone parses with a nested `echo`
        if not commands:
            self.note(rule, "the pattern is not shell that can be parsed; matched as raw text anywhere in the command "
                            "string, which is wider")
            return raw
        if body.lstrip().startswith("*") or any(c.program.startswith(_STAR) for c in commands):
            return raw  # a pattern about text anywhere in the command: its raw reading is its meaning
        parts = [f"(any c in shell(args.command): {self.deny_command(c, mode if len(commands) == 1 else 'prefix')})"
                 for c in commands]
        if len(commands) > 1:
            self.note(rule, "a pattern of several commands: matched when each of them appears in the string (in any "
                            "order, joined by any operator), or as raw text; wider than a pipeline")
            return "(" + " and ".join(parts) + ") or " + raw
        if self.needs_raw(body, mode) or len(raws) > 1:
            return f"{parts[0]} or {raw}"
        return parts[0]

    @staticmethod
    def needs_raw(body: str, mode: str) -> bool:
        """Whether a pattern has wildcards besides a final one (then its raw reading is added)."""
        marked = _Importer.mark_stars(body)
        if mode == "open":
            marked = marked[: -len(_STAR)] if marked.endswith(_STAR) else marked
        return _STAR in marked

    def raw_condition(self, body: str, mode: str) -> str:
        """The pattern read as raw text anywhere in the command string (Claude Code reads the
        pattern as a string; unanchored here, so that it is never narrower)."""
        g = star_glob(self.mark_stars(body))
        return f"args.command glob {q('*' + g + '*')}"

    def deny_command(self, p: subjects.Command, mode: str) -> str:
        """The normalized match of one pattern command for a deny or ask: the program's basename,
        every flag of the pattern (normalized), the positional words (subcommands in order,
        operands anywhere), glob words anywhere; wrappers only when the pattern names them;
        assignments and redirects ignored."""
        conj: list[str] = []
        program = p.program
        argv = list(p.argv)
        if program in WRAPPERS:  # a wrapper that wraps nothing in the pattern (`sudo *`): any use of it
            conj.append(f"(c.program == {q(program)} or c.wrappers contains {q(program)})")
            conj += [f"c.wrappers contains {q(w)}" for w in dict.fromkeys(p.wrappers)]
            return " and ".join(conj)  # a wrapper's own options are not compared: wider
        if _STAR in program:
            conj.append(f"c.program glob {q(star_glob(program))}")
        else:
            conj.append(f"c.program == {q(program)}")
        for w in p.wrappers:
            conj.append(f"c.wrappers contains {q(w)}")
        aliases = subjects.FLAG_ALIASES.get(program, {})
        # the pattern's literal flags, normalized as shell() normalizes a command's (glob words apart)
        literal_flags, _ = subjects.split_flags(program, [w for w in argv[1:] if _STAR not in w])
        flags = sorted({aliases.get(f, f) for f in literal_flags})
        for f in flags:
            conj.append(f"c.flags contains {q(f)}")
        globs = [w for w in argv[1:] if _STAR in w and w != _STAR]
        if mode == "exact" and _STAR not in "".join(argv):
            conj.append(f"c.args == {qlist(p.args)}")
        else:
            # Leading subcommand words (`push` of `git push`) in order; operands (`/`, `.env`)
            # anywhere; nothing is ordered after a wildcard.
            lead: list[str] = []
            operands: list[str] = []
            wild = False
            for a in p.args:
                if _STAR in a:
                    wild = True
                elif not wild and not operands and _IDENTIFIER.fullmatch(a):
                    lead.append(a)
                else:
                    operands.append(a)
            if lead:
                conj.append(f"c.args startswith {qlist(lead)}")
            for a in dict.fromkeys(operands):
                conj.append(f"c.args contains {q(a)}")
        for g in globs:
            alt = f"(any w in c.argv: w glob {q(star_glob(g))})"
            flag = re.fullmatch(r"(--?)([A-Za-z0-9][A-Za-z0-9-]*)" + _STAR, g)
            if flag:
                names = {aliases.get(ch, ch) for ch in flag.group(2)} if flag.group(1) == "-" and program not in subjects.SINGLE_DASH_LONG else {aliases.get(flag.group(2), flag.group(2))}
                alt = f"({alt} or " + " and ".join(f"c.flags contains {q(n)}" for n in sorted(names)) + ")"
            conj.append(alt)
        return " and ".join(conj)

    # --- allow --------------------------------------------------------------------------------

    def allow_section(self, rules: list[Rule]) -> list[Out]:
        out: list[Out] = []
        bash = [r for r in rules if r.tool == "Bash"]
        whole_bash = [r for r in bash if r.spec is None or r.spec.strip() in ("", "*")]
        # A settings comment goes with the rules that follow it: into the Bash allow rule when the
        # next rule is a Bash rule.
        bash_items: list[Rule] = []
        pending: list[Rule] = []
        for rule in rules:
            if rule.tool == "//":
                pending.append(rule)
                continue
            if rule.tool == "Bash":
                bash_items += pending + [rule]
            else:
                out += [Out(None, [], None, [c]) for c in pending]
                out += self.allow_rule(rule)
            pending = []
        out += [Out(None, [], None, [c]) for c in pending]
        if whole_bash:
            for r in bash:
                if r not in whole_bash:
                    self.note(r, "covered by the allow of every Bash command; not translated separately")
            return out + [Out("allow", ["Bash"], None, whole_bash)]
        if bash:
            out += self.bash_allow(bash_items)
        return out

    def allow_rule(self, rule: Rule) -> list[Out]:
        tool, spec = rule.tool, rule.spec
        dropped = "dropped: an allow that cannot be translated exactly is left out (fail closed)"
        if tool.startswith("mcp__"):
            if spec is not None and spec.strip() not in ("", "*"):
                self.note(rule, "MCP rules take no specifier; dropped (fail closed)")
                return [Out(None, [], None, [rule], [dropped])]
            return [Out("allow", self.mcp_selectors(tool), None, [rule])]
        if spec is None or spec.strip() == "" or (spec.strip() == "*" and tool not in READ_TOOLS + EDIT_TOOLS):
            notes = [self.note(rule, "an empty specifier; read as the whole tool")] if spec is not None and spec.strip() == "" else []
            return [Out("allow", list(self.tool_family(tool)), None, [rule], notes)]
        if tool in READ_TOOLS + EDIT_TOOLS:
            if spec.strip() == "*":
                self.note(rule, "Tool(*) on a file tool read as gitignore reads '*': everything under the working directory")
            return self.path_rules(rule, broad=False)
        cond = self.webfetch(rule, spec) if tool == "WebFetch" else self.named_spec(tool, spec)
        if cond is None:
            self.note(rule, f"the specifier of {tool} has no documented meaning that can be translated; dropped (fail closed)")
            return [Out(None, [], None, [rule], [dropped])]
        return [Out("allow", [tool], cond, [rule])]

    def bash_allow(self, rules: list[Rule]) -> list[Out]:
        """One rule: every command of the string matches some allowed pattern."""
        plain: list[tuple[Rule, str]] = []  # patterns without wrappers, assignments or redirects
        special: list[tuple[Rule, str]] = []
        dropped: list[Rule] = []
        wrappers: set[str] = set()
        for rule in rules:
            if rule.tool == "//":
                plain.append((rule, ""))
                continue
            result = self.allow_pattern(rule)
            if result is None:
                dropped.append(rule)
                continue
            cond, own_guard, wrapper = result
            if wrapper:
                wrappers.add(wrapper)
            (special if own_guard else plain).append((rule, cond))
        while plain and plain[-1][0].tool == "//":  # comments after the last pattern
            plain.pop()
        preface = ["Bash allow rules: a command string is allowed only when EVERY command in it (after &&, ||, ;, |,",
                   "newlines, and inside $(...), backticks, bash -c, xargs) matches one of them. A command must not add",
                   "VAR=x prefixes, wrappers (sudo, timeout, ...) or redirects outside the working directory that its",
                   "pattern does not name; programs are compared as written."]
        preface += [f"{rule.where} {shown(rule.text)} -- dropped (fail closed): {self.last_note(rule)}" for rule in dropped]
        if not any(cond for _, cond in plain) and not special:
            return [Out(None, [], None, [], preface=preface)]
        wrapper_guard = ("c.wrappers == []" if not wrappers
                         else f"(all w in c.wrappers: w in {qlist(sorted(wrappers))})")
        redirect_guard = '(all r in c.redirects: r == "/dev/null" or path(r) under context.cwd)'
        alternatives: list[str] = []

        def alt(cond: str) -> str:
            return f"({cond})" if " and " in cond or " or " in cond else cond

        if any(cond for _, cond in plain):
            width = max(len(alt(cond)) for _, cond in plain)
            lines, first = [], True
            for rule, cond in plain:
                if not cond:  # a settings comment
                    lines.append(f"   # {rule.where} {shown(rule.text)}")
                    continue
                lines.append(f"{'   ' if first else 'or '}{alt(cond).ljust(width)}   # {rule.where} {shown(rule.text)}")
                first = False
            block = [f"(c.assignments == [] and {wrapper_guard} and {redirect_guard}", " and ("]
            block += ["      " + line for line in lines] + ["     ))"]
            alternatives.append("\n".join(block))
        for rule, cond in special:
            alternatives.append(f"({cond})   # {rule.where} {shown(rule.text)}")
        body = "\n    or ".join(alternatives)
        condition = "\n".join([
            "len(shell(args.command)) > 0",
            "  # shell() does not see a redirect written after a heredoc (cat <<EOF > file): such strings are refused",
            '   and not (args.command glob "*<<*>*")',
            "   # shell() does not list a statement that only assigns (PATH=/tmp/evil; ls): refuse these variables",
            f"   and {ASSIGNMENT_GUARD}",
            "   and all c in shell(args.command):",
            "       " + body.replace("\n", "\n    "),
        ])
        reason = "Every command in it is allowed by the Claude Code settings."

        def custom(tools: list[str]) -> list[str]:
            return [f"allow {', '.join(tools)}", "  when " + condition, f"  reason {q(reason)}", f"  id {q(self.new_id('allow.Bash'))}"]

        return [Out("allow", ["Bash"], condition, [], id="allow.Bash", reason=reason, custom=custom, preface=preface)]

    def last_note(self, rule: Rule) -> str:
        for n in reversed(self.notes):
            if n.where == rule.where:
                return n.message
        return "not translatable"

    def allow_pattern(self, rule: Rule) -> tuple[str, bool, str | None] | None:
        """(condition on `c`, whether it carries its own guard, the wrapper it allows) for one
        allow pattern, or None (with a note) when it cannot be translated exactly."""
        body, mode = self.bash_split(rule.spec or "")
        if re.search(r":\*(\s|$)", body):
            self.note(rule, "':*' in the middle of a pattern is not Claude Code's prefix syntax; dropped (fail closed)")
            return None
        original = body
        commands, body, repair = self.bash_parse(rule, body, mode)
        if commands is None:
            self.note(rule, "the pattern is not shell that can be parsed (a fragment of a loop or an if?); dropped (fail closed)")
            return None
        if not commands:
            self.note(rule, "the pattern runs no command (only an assignment); dropped (fail closed)")
            return None
        top = [c for c in commands if not c.nested]
        if len(top) > 1:
            self.note(rule, "a pattern of several commands never matches one command; dropped (fail closed)")
            return None
        if repair:
            self.note(rule, "the pattern ends inside a quote; translated as the words before the quote, and the command's "
                            "text must start as the pattern is written (the same quote)")
        p = top[0]
        if len(commands) > 1 and p.program != "xargs":  # `xargs` alone parses with a nested `echo`
            self.note(rule, "the commands nested in the pattern are not allowed by it: each must match an allow rule of its own")
        argv = list(p.argv)
        stars = [i for i, w in enumerate(argv) if w == _STAR]
        conj: list[str] = []
        if len(stars) > 1 or (stars and mode != "exact") or (stars and stars[0] == 0 and len(argv) == 1):
            self.note(rule, "wildcards in several places cannot be expressed over the command's words; dropped (fail closed)")
            return None
        if stars:
            i = stars[0]
            pre, suf = argv[:i], argv[i + 1:]
            if any(_STAR in w for w in pre + suf):
                self.note(rule, "wildcards in several places cannot be expressed over the command's words; dropped (fail closed)")
                return None
            if pre:
                conj.append(f"c.argv startswith {qlist(pre)}")
            conj.append(f"c.argv endswith {qlist(suf)}")
            conj.append(f"len(c.argv) > {len(pre) + len(suf)}")
        else:
            literal = []
            for w in argv:
                if _STAR in w:
                    break
                literal.append(w)
            if len(literal) == len(argv):
                conj.append(f"c.argv {'==' if mode == 'exact' else 'startswith'} {qlist(literal)}")
            else:
                if literal:
                    conj.append(f"c.argv startswith {qlist(literal)}")
                for i in range(len(literal), len(argv)):
                    w = argv[i]
                    if _STAR not in w:
                        conj.append(f"len(c.argv) > {i} and c.argv[{i}] == {q(w)}")
                        continue
                    g = self.allow_glob(f"c.argv[{i}]", w)
                    if g is None:
                        self.note(rule, "a wildcard word with '?' or '*' characters of its own cannot be matched exactly; dropped (fail closed)")
                        return None
                    conj.append(f"len(c.argv) > {i} and {g}")
                if mode == "exact":
                    conj.append(f"len(c.argv) == {len(argv)}")
        if repair:
            conj.append(f"c.text startswith {q(original)}")
        own_guard = bool(p.wrappers or p.assignments or p.redirects)
        wrapper = p.program if (p.program in WRAPPERS and not p.wrappers and mode != "exact") else None
        if own_guard:
            conj.append(f"c.assignments == {qlist(p.assignments)}")
            conj.append(f"c.wrappers == {qlist(p.wrappers)}")
            if p.redirects:
                conj.append(f"c.redirects == {qlist(p.redirects)}")
            else:
                conj.append('(all r in c.redirects: r == "/dev/null" or path(r) under context.cwd)')
            if p.wrappers:
                # the wrappers' own options (`timeout 60`, `sudo -u x`) are compared as written
                text = p.text.replace(_STAR, "").rstrip()
                if mode == "exact":
                    conj.append(f"c.text == {q(text)}")
                else:
                    conj.append(f"(c.text == {q(text)} or c.text startswith {q(text + ' ')})")
        if any(_STAR in a for a in p.assignments) or any(_STAR in w for w in p.redirects):
            self.note(rule, "a wildcard in an assignment or a redirect cannot be matched exactly; dropped (fail closed)")
            return None
        return " and ".join(conj), own_guard, wrapper

    @staticmethod
    def allow_glob(expr: str, word: str) -> str | None:
        """An in-word wildcard of an allow pattern: within one path segment. A word with a slash is
        matched as a path glob (`*` does not cross `/`, `..` is resolved), one without as a string
        glob on a word that has no slash."""
        literal = word.replace(_STAR, "")
        if "?" in literal or "*" in literal:
            return None
        if "/" in word:
            return f"path({expr}) glob {q(word.replace(_STAR, '*'))}"
        return f"not ({expr} contains \"/\") and {expr} glob {q(star_glob(word))}"


# --- public API ---------------------------------------------------------------------------------


def import_settings(
    settings: Any,
    *,
    source: str | None = None,
    name: str | None = None,
    root: str | None = None,
    home: str | None = None,
    bash_file_rules: bool = True,
) -> ImportResult:
    """Translate a Claude Code settings object (the whole file, or its `permissions` block).

    `source` names the file in comments; `name` is the policy's name; `root` is the directory that
    `/path` rules are relative to (for `.claude/settings.json`, the project); `home` becomes the
    policy's `home` (what `~` means when a call's context has no `home`). `bash_file_rules`: also
    apply Read/Edit denies to the files Bash commands name. Raises SettingsError for input that is
    not a settings object.
    """
    if root is not None and not root.startswith("/"):
        raise SettingsError(f"the root must be an absolute path, not {root!r}")
    if home is not None and not home.startswith("/"):
        raise SettingsError(f"the home must be an absolute path, not {home!r}")
    importer = _Importer(root=posixpath.normpath(root) if root else None, home=posixpath.normpath(home) if home else None,
                         bash_file_rules=bash_file_rules)
    text = importer.run(settings, source, name)
    return ImportResult(text, importer.notes)


def default_root(path: str | Path) -> str:
    """The directory `/path` rules of a settings file are relative to: the project for a file in a
    `.claude` directory, else the file's own directory."""
    folder = Path(path).resolve().parent
    return str(folder.parent if folder.name == ".claude" else folder)


def import_file(path: str | Path, **options: Any) -> ImportResult:
    """Read a settings file (UTF-8 JSON) and translate it; `root` defaults to `default_root`."""
    data = Path(path).read_text(encoding="utf-8")
    try:
        settings = json.loads(data)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    options.setdefault("root", default_root(path))
    options.setdefault("source", str(path))
    return import_settings(settings, **options)


def hook_context(payload: dict) -> dict:
    """The context for a Claude Code PreToolUse hook input: `cwd`, and `home` when the transcript
    path shows it (`/Users/me/.claude/projects/...` → `/Users/me`; on Windows
    `C:\\Users\\me\\.claude\\projects\\...` → `C:\\Users\\me`)."""
    context: dict[str, str] = {}
    cwd = payload.get("cwd")
    if isinstance(cwd, str):
        context["cwd"] = cwd
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and "/.claude/" in transcript and transcript.startswith("/"):
        context["home"] = transcript.split("/.claude/", 1)[0] or "/"
    elif isinstance(transcript, str) and "\\.claude\\" in transcript and transcript[1:3] == ":\\":
        context["home"] = transcript.split("\\.claude\\", 1)[0]
    return context
