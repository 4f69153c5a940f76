"""Generated policies of any size over the corpus's real tools, and the call mix that exercises them.

A generated policy is built as a small intermediate form (`Rule`, condition nodes) that renders
both to countersign's language (`Rule.countersign()`) and to Cedar (`bench.cedar`), so that the
two engines decide the same rules.

A tool gets the same rules at every size (an RNG seeded with its name): 8-16 for a shell tool,
4-8 for a file tool, 1-5 for others; tool names are added until the rules fill the size. So a
bigger policy has more tools, not more rules per tool, which is what a growing deployment looks
like (about 2,000 tools at 10,000 rules). Name j takes the argument shape ("profile") of corpus tool
j mod P: the first P names are the corpus's own tool names, the rest are clones named
`mcp__s<k>__<tool>` (the same tool offered by another MCP server). The first profiles are the
tools of the call mix (the most frequent tools of each corpus file), so every size covers them.

Rules per tool mix, with weights drawn from a seeded RNG: exact tool names (a few listing
several tools), about 3% globs over name prefixes (`get_*`, `Gmail*`, `mcp__s3__*`), and
conditions over the real arguments: `==`, `in [...]`, `startswith`, `len(...) >`, `>` on
integers, `exists`, `and`/`or`/`not`, `shell()` rules on the shell tools (program sets, program
with flag, argv prefixes, `all` over read-only programs) and `path()` rules on the file tools
(`under`, `glob`). Literal values are sampled from the corpus so that conditions hold for some
calls and not others.

The call mix is every corpus call of the mix tools (each renamed to one of that tool's names in
the policy, chosen per call, so the whole name space is exercised), plus 5% calls of tools the
policy does not know (the default applies).
"""

from __future__ import annotations

import collections
import json
import random
import re
from dataclasses import dataclass, field
from typing import Iterable

# The tools whose calls make up the mix, per corpus file, most frequent first.
MIX_PER_SOURCE = {"tau": 6, "coding": 8, "toolemu": 6}
SHELL_TOOLS = {"Bash", "bash", "TerminalExecute"}
PATH_FIELDS = ("file_path", "notebook_path", "path")
SANE_TOOL = re.compile(r"[A-Za-z0-9_.\-]{1,100}\Z")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --- condition nodes ------------------------------------------------------------------------------
# Each node renders to countersign (`cs()`) and to Cedar (`cedar(unknown)`, see bench.cedar) and
# names what it reads (`reads()`: ("args", field) or ("derived", key)).


def cs_str(value: str) -> str:
    return json.dumps(value)


TOOL_PATTERN = re.compile(r"[A-Za-z0-9_*?][A-Za-z0-9_*?.\-]*\Z")


def cs_selector(name: str) -> str:
    return name if TOOL_PATTERN.match(name) else cs_str(name)


def cs_lit(value) -> str:
    return json.dumps(value)


def cs_field(name: str) -> str:
    return f"args.{name}" if IDENT.match(name) else f"args[{cs_str(name)}]"


@dataclass(frozen=True)
class Eq:
    field: str
    value: object

    def cs(self) -> str:
        return f"{cs_field(self.field)} == {cs_lit(self.value)}"


@dataclass(frozen=True)
class In:
    field: str
    values: tuple

    def cs(self) -> str:
        return f"{cs_field(self.field)} in [{', '.join(cs_lit(v) for v in self.values)}]"


@dataclass(frozen=True)
class StartsWith:
    field: str
    prefix: str

    def cs(self) -> str:
        return f"{cs_field(self.field)} startswith {cs_str(self.prefix)}"


@dataclass(frozen=True)
class LenGt:
    field: str
    limit: int

    def cs(self) -> str:
        return f"len({cs_field(self.field)}) > {self.limit}"


@dataclass(frozen=True)
class NumGt:
    field: str
    limit: int

    def cs(self) -> str:
        return f"{cs_field(self.field)} > {self.limit}"


@dataclass(frozen=True)
class Exists:
    field: str

    def cs(self) -> str:
        return f"exists({cs_field(self.field)})"


@dataclass(frozen=True)
class ShellAny:
    """Some command of the shell string runs one of `programs`."""

    field: str
    programs: tuple[str, ...]

    def cs(self) -> str:
        if len(self.programs) == 1:
            return f"any c in shell({cs_field(self.field)}): c.program == {cs_str(self.programs[0])}"
        return f"any c in shell({cs_field(self.field)}): c.program in [{', '.join(map(cs_str, self.programs))}]"


@dataclass(frozen=True)
class ShellAll:
    """Every command of the shell string runs one of `programs`."""

    field: str
    programs: tuple[str, ...]

    def cs(self) -> str:
        return f"all c in shell({cs_field(self.field)}): c.program in [{', '.join(map(cs_str, self.programs))}]"


@dataclass(frozen=True)
class ShellProgFlag:
    """Some command runs `program` with the (normalized) flag `flag`."""

    field: str
    program: str
    flag: str

    def cs(self) -> str:
        return f"any c in shell({cs_field(self.field)}): c.program == {cs_str(self.program)} and c.flags contains {cs_str(self.flag)}"


@dataclass(frozen=True)
class ShellHead:
    """Some command's first two words are `words`."""

    field: str
    words: tuple[str, str]

    def cs(self) -> str:
        return f"any c in shell({cs_field(self.field)}): c.argv startswith [{', '.join(map(cs_str, self.words))}]"


@dataclass(frozen=True)
class PathUnder:
    field: str
    base: str  # absolute, normalized, not "/"

    def cs(self) -> str:
        return f"path({cs_field(self.field)}) under {cs_str(self.base)}"


# Path globs countersign understands, with the Cedar `like` patterns that match the same
# normalized paths (Cedar's `*` crosses "/", which these patterns make up for).
PATH_GLOBS = {
    "/**/.env": ("*/.env",),
    "/**/*.pem": ("*.pem",),
    "/**/.ssh/**": ("*/.ssh", "*/.ssh/*"),
    "/**/node_modules/**": ("*/node_modules", "*/node_modules/*"),
    "/**/*.lock": ("*.lock",),
    "/**/.git/**": ("*/.git", "*/.git/*"),
}


@dataclass(frozen=True)
class PathGlob:
    field: str
    pattern: str  # a key of PATH_GLOBS

    def cs(self) -> str:
        return f"path({cs_field(self.field)}) glob {cs_str(self.pattern)}"


@dataclass(frozen=True)
class Not:
    operand: object

    def cs(self) -> str:
        return f"not ({self.operand.cs()})"


@dataclass(frozen=True)
class And:
    operands: tuple

    def cs(self) -> str:
        return " and ".join(_operand(o) for o in self.operands)


@dataclass(frozen=True)
class Or:
    operands: tuple

    def cs(self) -> str:
        return " or ".join(_operand(o) for o in self.operands)


def _operand(node) -> str:
    # a quantifier's body runs to the end of the condition, so it is parenthesized inside and/or
    return f"({node.cs()})" if isinstance(node, (Or, And, ShellAny, ShellAll, ShellProgFlag, ShellHead)) else node.cs()


SUBJECT_NODES = (ShellAny, ShellAll, ShellProgFlag, ShellHead, PathUnder, PathGlob)


def walk(node) -> Iterable:
    yield node
    if isinstance(node, Not):
        yield from walk(node.operand)
    elif isinstance(node, (And, Or)):
        for o in node.operands:
            yield from walk(o)


# --- rules ----------------------------------------------------------------------------------------


@dataclass
class Rule:
    effect: str
    selectors: tuple[str, ...]
    condition: object | None = None
    reason: str | None = None
    rule_id: str | None = None  # set when rendered

    @property
    def globs(self) -> bool:
        return any("*" in s for s in self.selectors)

    @property
    def uses_subjects(self) -> bool:
        return self.condition is not None and any(isinstance(n, SUBJECT_NODES) for n in walk(self.condition))

    def countersign(self) -> str:
        head = f"{self.effect} {', '.join(map(cs_selector, self.selectors))}"
        if self.condition is not None:
            head += f"\n  when {self.condition.cs()}"
        if self.reason:
            head += f"\n  reason {cs_str(self.reason)}"
        if self.effect == "ask":
            head += "\n  approvers 1 from ops"
        head += f"\n  id {cs_str(self.rule_id)}"
        return head


@dataclass
class GeneratedPolicy:
    size: int
    rules: list[Rule]
    tools: list[str]  # the tool name space, slot order
    exact_tools: set[str]
    text: str = ""
    calls: list[dict] = field(default_factory=list)


# --- profiles of the corpus tools -----------------------------------------------------------------


@dataclass
class FieldProfile:
    name: str
    kind: str  # dominant JSON type: str, int, bool, list, dict
    presence: float  # share of the tool's calls that carry the field
    consistent: float  # share of those where it has the dominant type
    strings: list[str] = field(default_factory=list)  # short sampled values
    lengths: list[int] = field(default_factory=list)
    ints: list[int] = field(default_factory=list)


@dataclass
class Profile:
    tool: str
    source: str
    calls: int
    fields: dict[str, FieldProfile]
    shell_field: str | None = None
    path_fields: tuple[str, ...] = ()

    def usable(self, kind: str) -> list[FieldProfile]:
        return [f for f in self.fields.values() if f.kind == kind and f.presence >= 0.9 and f.consistent >= 0.98]


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return "null"


def build_profiles(corpus: dict[str, list[dict]]) -> tuple[list[Profile], list[str]]:
    """Profiles of every corpus tool, mix tools first; and the names of the mix tools."""
    by_tool: dict[str, list[dict]] = collections.defaultdict(list)
    source_of: dict[str, str] = {}
    for source, calls in corpus.items():
        for call in calls:
            by_tool[call["tool"]].append(call)
            source_of.setdefault(call["tool"], source)
    profiles: dict[str, Profile] = {}
    for tool, calls in by_tool.items():
        if not SANE_TOOL.match(tool):  # a few ToolEmu "tool names" are an LLM's prose; no policy names them
            continue
        kinds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        values: dict[str, list] = collections.defaultdict(list)
        for call in calls:
            for name, value in call["args"].items():
                kinds[name][_kind(value)] += 1
                values[name].append(value)
        fields = {}
        for name, counter in kinds.items():
            kind, n = counter.most_common(1)[0]
            total = sum(counter.values())
            fp = FieldProfile(name, kind, total / len(calls), n / total)
            typed = [v for v in values[name] if _kind(v) == kind]
            if kind == "str":
                fp.strings = [v for v in typed if 0 < len(v) <= 60 and "\n" not in v and "\\" not in v]
                fp.lengths = sorted(len(v) for v in typed)
            elif kind in ("list", "dict"):
                fp.lengths = sorted(len(v) for v in typed)
            elif kind == "int":
                fp.ints = sorted(v for v in typed if abs(v) < 2**53)
            fields[name] = fp
        shell_field = "command" if tool in SHELL_TOOLS and "command" in fields else None
        path_fields = tuple(f for f in PATH_FIELDS if f in fields and fields[f].kind == "str" and fields[f].presence >= 0.9)
        profiles[tool] = Profile(tool, source_of[tool], len(calls), fields, shell_field, path_fields)
    mix: list[str] = []
    for source, count in MIX_PER_SOURCE.items():
        ranked = sorted((p for p in profiles.values() if p.source == source), key=lambda p: (-p.calls, p.tool))
        mix += [p.tool for p in ranked[:count]]
    rest = sorted((p for p in profiles.values() if p.tool not in mix), key=lambda p: (-p.calls, p.tool))
    return [profiles[t] for t in mix] + rest, mix


# --- the generator --------------------------------------------------------------------------------

DANGEROUS = ("rm", "dd", "mkfs", "shred", "chmod", "chown", "kill", "reboot", "shutdown")
NETWORK = ("curl", "wget", "ssh", "scp", "nc", "rsync")
READ_ONLY = ("ls", "cat", "grep", "rg", "head", "tail", "wc", "pwd", "echo", "find", "git", "which", "sort")
HEADS = (("git", "push"), ("git", "reset"), ("npm", "publish"), ("git", "commit"), ("docker", "run"), ("pip", "install"))
PROG_FLAGS = (("rm", "recursive"), ("rm", "force"), ("git", "force"), ("chmod", "recursive"), ("curl", "data"), ("sed", "in-place"))
SYSTEM_DIRS = ("/etc", "/usr", "/var", "/root", "/System", "/private")


def has_conditions(p: Profile) -> bool:
    """Whether the generator can write a condition over this tool's arguments."""
    return bool(p.shell_field or p.path_fields or [f for f in p.usable("str") if f.strings] or p.usable("int")
                or [f for f in p.usable("list") if f.lengths])


def slot_name(j: int, profiles: list[Profile]) -> str:
    p = profiles[j % len(profiles)]
    return p.tool if j < len(profiles) else f"mcp__s{j // len(profiles)}__{p.tool}"


class _Gen:
    def __init__(self, profiles: list[Profile], rng: random.Random):
        self.profiles = profiles
        self.rng = rng

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    # one atom over a plain argument, or None when the tool has no usable field
    def atom(self, p: Profile, polarity: str):
        rng = self.rng
        choices = []
        strs = [f for f in p.usable("str") if f.strings]
        if strs:
            choices += ["eq", "in", "startswith", "len"] if polarity != "allow" else ["eq", "in", "in", "startswith", "len"]
        if p.usable("int"):
            choices.append("num")
        if p.usable("list") and p.usable("list")[0].lengths:
            choices.append("lenlist")
        if not choices:
            return None
        kind = self.pick(choices)
        if kind == "num":
            f = self.pick(p.usable("int"))
            return NumGt(f.name, self.pick(f.ints) if f.ints else 10)
        if kind == "lenlist":
            f = self.pick(p.usable("list"))
            return LenGt(f.name, self.pick(f.lengths))
        f = self.pick(strs)
        if kind == "eq":
            return Eq(f.name, self.pick(f.strings))
        if kind == "in":
            return In(f.name, tuple(dict.fromkeys(self.pick(f.strings) for _ in range(rng.randint(2, 6)))))
        if kind == "startswith":
            value = self.pick(f.strings)
            return StartsWith(f.name, value[: rng.randint(1, min(6, len(value)))])
        limit = f.lengths[min(len(f.lengths) - 1, int(len(f.lengths) * rng.uniform(0.5, 0.95)))]
        return LenGt(f.name, limit)

    def shell_atom(self, p: Profile, effect: str):
        field = p.shell_field
        rng = self.rng
        if effect == "allow":
            return ShellAll(field, tuple(sorted(rng.sample(READ_ONLY, rng.randint(4, len(READ_ONLY))))))
        kind = self.pick(("any", "flag", "head", "net"))
        if kind == "any":
            return ShellAny(field, tuple(sorted(rng.sample(DANGEROUS, rng.randint(1, 3)))))
        if kind == "flag":
            return ShellProgFlag(field, *self.pick(PROG_FLAGS))
        if kind == "head":
            return ShellHead(field, self.pick(HEADS))
        return ShellAny(field, tuple(sorted(rng.sample(NETWORK, rng.randint(1, 3)))))

    def path_atom(self, p: Profile):
        f = p.fields[self.pick(p.path_fields)]
        if self.rng.random() < 0.5:
            return PathGlob(f.name, self.pick(sorted(PATH_GLOBS)))
        absolute = [s for s in f.strings if s.startswith("/") and "$" not in s and "`" not in s]
        if absolute and self.rng.random() < 0.7:
            parts = [x for x in self.pick(absolute).split("/") if x not in ("", ".", "..")]
            if len(parts) >= 2:
                return PathUnder(f.name, "/" + "/".join(parts[: self.rng.randint(1, min(4, len(parts) - 1))]))
        return PathUnder(f.name, self.pick(SYSTEM_DIRS))

    def condition(self, p: Profile, effect: str):
        rng = self.rng
        if p.shell_field and rng.random() < 0.8:
            base = self.shell_atom(p, effect)
            if rng.random() < 0.25 and effect != "allow":
                other = self.shell_atom(p, effect)
                return Or((base, other))
            return base
        if p.path_fields and rng.random() < 0.6:
            base = self.path_atom(p)
            if effect == "allow":  # allow inside a project, but not its secrets
                return And((PathUnder(base.field, base.base) if isinstance(base, PathUnder) else self.path_atom(p), Not(PathGlob(base.field, "/**/.env"))))
            return base
        first = self.atom(p, effect)
        if first is None:
            return None
        roll = rng.random()
        if roll < 0.2:
            second = self.atom(p, effect)
            if second is not None and second != first:
                return And((first, Not(second))) if rng.random() < 0.4 else And((first, second))
        elif roll < 0.35:
            second = self.atom(p, effect)
            if second is not None and second != first:
                return Or((first, second))
        elif roll < 0.4:
            optional = [f for f in p.fields.values() if f.presence < 0.9 and f.kind == "int" and f.ints]
            if optional:
                f = self.pick(optional)
                return And((Exists(f.name), NumGt(f.name, self.pick(f.ints))))
        return first

    def rules_for(self, name: str, p: Profile, count: int, all_names: list[str]) -> list[Rule]:
        rng = self.rng
        rules: list[Rule] = []
        unconditional = False
        for _ in range(count):
            effect = rng.choices(("allow", "ask", "deny"), (45, 30, 25))[0]
            condition = self.condition(p, effect)
            if condition is None or (not unconditional and rng.random() < 0.12):
                if unconditional:  # one conditionless rule per tool; further ones get a condition
                    effect, condition = "allow", None
                unconditional = True
                selectors = (name,)
                if rng.random() < 0.3:  # `allow A, B, C`
                    selectors += tuple(dict.fromkeys(self.pick(all_names) for _ in range(rng.randint(1, 3))))
                    selectors = tuple(dict.fromkeys(selectors))
                effect = "allow" if effect == "deny" and rng.random() < 0.7 else effect
                rules.append(Rule(effect, selectors, None, _reason(effect, name)))
                continue
            rules.append(Rule(effect, (name,), condition, _reason(effect, name)))
        return rules

    def glob_rule(self, names: list[str]) -> Rule:
        """A glob over one name's prefix: a whole MCP server (`mcp__s3__*`) or a family of tools
        (`get_*`, `Gmail*`, `mcp__s3__GmailSen*`); never wider than one server."""
        name = self.pick(names)
        m = re.match(r"(.*__)", name)  # every server prefix: mcp__s3__, mcp__s3__mcp__github__
        server = m.group(1) if m else ""
        bare = name[len(server):]
        if server and self.rng.random() < 0.5:
            pattern = server + "*"
        else:
            camel = re.match(r"[A-Z][a-z]+", bare)
            snake = re.match(r"[a-z]+_", bare)
            stem = camel.group(0) if camel else snake.group(0) if snake else bare[:4]
            if self.rng.random() < 0.3 or len(stem) < 3:  # a narrower prefix
                stem = bare[: max(len(stem), min(len(bare) - 1, len(stem) + self.rng.randint(2, 6)))]
            pattern = server + stem + "*"
        effect = self.rng.choices(("allow", "ask", "deny"), (60, 30, 10))[0]
        return Rule(effect, (pattern,), None, _reason(effect, pattern))


def _reason(effect: str, name: str) -> str | None:
    if effect == "deny":
        return f"{name}: not allowed with these arguments; ask a person or change the call."
    if effect == "ask":
        return f"{name}: a person from ops decides."
    return None


def rules_per_tool(p: Profile, rng: random.Random) -> int:
    """How many rules a tool gets; the same distribution at every policy size."""
    if p.shell_field:
        return rng.randint(8, 16)
    if p.path_fields:
        return rng.randint(4, 8)
    return rng.randint(1, 5) if has_conditions(p) else 1


def generate(size: int, profiles: list[Profile], mix: list[str], seed: int = 7) -> GeneratedPolicy:
    """A policy of exactly `size` rules (see the module docstring). Each tool's rules come from an
    RNG seeded with the tool's name, so a tool has the same rules at every size; names are added
    until the rules fill the size (minus about 3% for globs)."""
    rng = random.Random(f"{seed}:{size}")
    n_globs = max(2, size * 3 // 100)
    budget = size - n_globs
    rules: list[Rule] = []
    names: list[str] = []
    j = 0
    while len(rules) < budget:
        name = slot_name(j, profiles)
        p = profiles[j % len(profiles)]
        tool_rng = random.Random(f"{seed}:{name}")
        count = min(rules_per_tool(p, tool_rng), budget - len(rules))
        names.append(name)
        rules += _Gen(profiles, tool_rng).rules_for(name, p, count, names)
        j += 1
    gen = _Gen(profiles, rng)
    patterns: set[str] = set()
    for _ in range(n_globs):
        rule = gen.glob_rule(names)
        for _ in range(50):  # distinct patterns
            if rule.selectors[0] not in patterns:
                break
            rule = gen.glob_rule(names)
        patterns.add(rule.selectors[0])
        rules.insert(rng.randrange(len(rules) + 1), rule)  # spread the globs through the file
    for i, rule in enumerate(rules):
        rule.rule_id = f"r{i}"
    exact = {s for r in rules for s in r.selectors if "*" not in s}
    policy = GeneratedPolicy(size, rules, names, exact)
    policy.text = render(policy)
    return policy


def render(policy: GeneratedPolicy) -> str:
    head = [
        f'policy "generated-{policy.size}"',
        'default ask "No rule covers this tool; a person from ops decides."',
        "  approvers 1 from ops",
        'group ops = ["ops-1", "ops-2", "ops-3"]',
        "",
    ]
    return "\n".join(head + [r.countersign() for r in policy.rules]) + "\n"


def call_mix(corpus: dict[str, list[dict]], profiles: list[Profile], mix: list[str], policy: GeneratedPolicy, seed: int = 11) -> list[dict]:
    """The calls to time against `policy`: every corpus call of a mix tool, renamed to one of the
    names that tool has in the policy, plus 5% calls of tools the policy does not name."""
    rng = random.Random(f"{seed}:{policy.size}")
    index = {p.tool: i for i, p in enumerate(profiles)}
    slots = len(policy.tools)
    calls, others = [], []
    for source in corpus:
        for call in corpus[source]:
            if call["tool"] in mix:
                calls.append(call)
            elif SANE_TOOL.match(call["tool"]):
                others.append(call)
    out = []
    for call in calls:
        i = index[call["tool"]]
        clones = [j for j in range(i, slots, len(profiles))]
        j = clones[rng.randrange(len(clones))]
        out.append({**call, "tool": policy.tools[j], "base_tool": call["tool"]})
    for call in rng.sample(others, min(len(others), len(out) // 19)):
        out.append({**call, "tool": "unlisted_" + call["tool"], "base_tool": call["tool"]})
    return out
