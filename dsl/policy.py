"""`Policy`: a loaded policy file that decides tool calls.

Loading runs the whole pipeline (parse → check → compile) and refuses a file with any error::

    policy = Policy.load("samples/retail.policy")
    decision = policy.evaluate("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"})
    decision.effect        # "ask"
    decision.requirements  # Requirements(quorums=(Quorum(count=1, approvers=('desk-1', ...)),), ...)

A Policy is immutable and its `evaluate` is pure: the same call gives the same Decision on every
replay. `digest` (hex SHA-256) identifies what decided: the source bytes, and the members of every
roster group the policy names (see `policy_digest`), so one digest always means one set of decisions.

An `approvers N from GROUP` may name a group the policy does not define when the policy is loaded
with external groups (`Policy.load(path, groups=roster.groups())`): they are resolved at load time,
like the policy's own, into the identities the requirements list.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from dsl import ast, includes, lets, tree_cache
from dsl.compiler import _NO_VARS, CompiledRule, Env, RuleIndex, compile_plan, compile_rule, requirements_of
from dsl.decision import Decision, DefaultEffect, RuleOutcome, decide
from dsl.sources import PolicyFile, root_path, sources_digest
from dsl.errors import Diagnostic, PolicyError, PolicyInputError, Span, source_lines
from dsl.values import TOO_DEEP as _TOO_DEEP, EvalError, failure_message

_new_tuple = tuple.__new__
_CACHED_ERRORS_CHARS = 1024  # a decision with errors is kept when their messages are this short
_CACHED_TOOL_NAME = 256  # characters; see Policy._plan
_NO_CONTEXT: dict = {}  # the context of a call made without one (conditions only read it)


def _gc_paused(load):
    """Run `load` with the cyclic garbage collector paused. Parsing a large policy allocates
    hundreds of thousands of objects that all stay alive until the tree is compiled, so the
    collector's passes during a load find nothing to free, yet each full pass walks every object in
    the process: for 10,000 rules they were half the load time. Whatever cycles a load leaves are
    collected on the collector's next pass. A collector already paused by the caller stays so."""

    @functools.wraps(load)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return load(*args, **kwargs)
        gc.disable()
        try:
            return load(*args, **kwargs)
        finally:
            gc.enable()

    return paused


class Policy:
    """A checked, compiled policy.

    Attributes: `name` (from `policy "..."`, else the file's stem), `digest` (`policy_digest`: hex
    SHA-256 of the source bytes and of the roster groups it uses), `source_digest` (hex SHA-256 of
    the source bytes alone; of every file read when it includes others: `dsl.sources.sources_digest`),
    `sources` (every file read, as `dsl.sources.PolicyFile`s (path, bytes): the loaded file first
    under its base name, the included ones by their paths relative to its folder; what a ledger
    pins and `from_sources` loads again), `included` (shown name → text of each included file, for
    diagnostics), `rules` (file order), `default`, `groups` (name → identities, the
    policy's own and the external ones it uses), `external_groups` (the external groups it uses,
    name → sorted identities, in name order), `home` (what `~` stands for when a call's context has
    no `home`), `warnings` (diagnostics that did not stop loading), `source_name` and `source_text`.
    """

    def __init__(
        self,
        *,
        name: str,
        digest: str,
        source_name: str,
        source_text: str,
        rules: list[CompiledRule],
        default: DefaultEffect,
        groups: dict[str, tuple[str, ...]],
        warnings: list[Diagnostic],
        home: str | None = None,
        source_digest: str | None = None,
        external_groups: dict[str, tuple[str, ...]] | None = None,
        sources: tuple[PolicyFile, ...] | None = None,
        included: dict[str, str] | None = None,
    ):
        self.name = name
        self.digest = digest
        self.source_digest = source_digest or digest
        self.external_groups = external_groups or {}
        self.source_name = source_name
        self.source_text = source_text
        # every file it was read from, root first (dsl.sources): what a ledger pins
        self.sources = sources if sources is not None else (PolicyFile(root_path(source_name), source_text.encode("utf-8")),)
        self.included = included or {}
        self.rules = tuple(rules)
        self.default = default
        self.groups = groups
        self.home = home
        self.warnings = warnings
        self._index = RuleIndex(rules)
        # whether a rule reads the run's history (`run`, calls(), sources(), ...): a Gate keeps
        # the history index (ledger.workflow.history) only for such a policy
        self.reads_history = any(r.reads_history for r in rules)
        self._requirements = {r.rule_id: r.requirements for r in rules if r.requirements is not None}
        # For `evaluate`'s fast path: what a rule whose condition holds (or that has none) yields
        # is the same for every call, so it is built once per rule; the (test, rule) pairs to run
        # for a tool are kept per tool name; and when no condition errored, the Decision depends
        # only on which rules matched, so it is kept per tuple of their positions. All three are
        # immutable values, and the caches are bounded like the RuleIndex's.
        self._hits = {
            r.order: RuleOutcome(rule=r.rule_id, line=r.line, effect=r.effect, counted=True, error=None, reason=r.reason, condition=r.condition_text)
            for r in rules
        }
        self._plans: dict[str, tuple[tuple[tuple[Any, int], ...], bool, Any]] = {}
        self._compiled: dict[tuple[int, ...], Any] = {}  # plans by candidate rules (see _plan)
        self._decisions: dict[tuple[int, ...], Decision] = {}

    # --- loading ------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, *, tools: Any = None, groups: Mapping[str, Any] | None = None,
             cache: bool = False) -> "Policy":
        """Read, parse, check and compile a `.policy` file (UTF-8).

        Raises OSError when the file cannot be read and `PolicyError` (every diagnostic, each with
        `file:line:col`) when it is not a valid policy. With `tools` (a `dsl.schema.ToolSchemas`,
        or the path of a tools file), the policy is also checked against the tools' argument
        schemas, and an unknown tool, argument or wrong type is an error too. `groups`: external
        groups, as for `from_text`. `cache`: as for `from_text`.
        """
        path = Path(path)
        data = path.read_bytes()
        try:
            # A byte-order mark some editors write is not part of the policy (the digest still
            # covers the file's bytes as they are).
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise PolicyError(str(path), "", (Diagnostic("error", "the file is not valid UTF-8", Span.point(line, 1)),)) from None
        from dsl.includes import disk_reader

        return cls.from_text(text, name=str(path), default_name=path.stem, source_bytes=data, tools=tools, groups=groups,
                             cache=cache, include_from=(path.name, disk_reader(path.parent)))

    @classmethod
    def from_sources(cls, sources, *, tools: Any = None, groups: Mapping[str, Any] | None = None) -> "Policy":
        """Load a policy from the files it read, as `Policy.sources` lists them: ((path, bytes),
        ...) or `dsl.sources.PolicyFile`s, the loaded file first (named by its base name, as
        `dsl.sources.root_path` names it: a directory in its path is dropped); its includes are
        read from the others, never from disk. The same sources give the same policy and digest
        (a ledger's pinned files load this way: ledger.pinning). Raises `PolicyError` as `load`
        does (a missing source is an error at its include)."""
        sources = tuple(PolicyFile(str(p), bytes(b)) for p, b in sources)
        if not sources:
            raise ValueError("no sources: the first is the policy file")
        path, data = sources[0]
        from dsl.includes import memory_reader

        try:
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise PolicyError(path, "", (Diagnostic("error", "the file is not valid UTF-8", Span.point(line, 1)),)) from None
        stem = path.rsplit("/", 1)[-1].removesuffix(".policy")
        return cls.from_text(text, name=path, default_name=stem, source_bytes=data, tools=tools, groups=groups,
                             include_from=(path, memory_reader(dict(sources))))

    @classmethod
    @_gc_paused
    def from_text(
        cls,
        text: str,
        name: str = "<policy>",
        *,
        default_name: str | None = None,
        source_bytes: bytes | None = None,
        tools: Any = None,
        groups: Mapping[str, Any] | None = None,
        cache: bool = False,
        include_from: tuple[str, Any] | None = None,
    ) -> "Policy":
        """Parse, check and compile policy source. `name` is used in diagnostics.

        Raises `PolicyError` on a syntax error or any check error. `tools`: as for `load`.

        `groups`: external groups, name → member identities (an iterable of str; a roster's:
        `ledger.proof.roster.Roster.groups()`), which `approvers N from NAME` may name when the
        policy defines no group NAME. A name both the policy and `groups` define with other members
        is an error (`group 'x' is defined in the policy (line N) with other members than the
        roster's`; the same members are one group, the policy's), as are an empty external
        group that a rule names and a quorum larger than it. The digest covers the external groups
        the policy names (see `policy_digest`). Raises TypeError when `groups` is not of that shape.

        `cache`: read the checked tree of a source loaded before from, and keep this one's in,
        the user's cache (dsl.tree_cache: a process that loads the same file each time, as a
        hook does, skips Lark and the parse); used only without `tools` and `groups`.

        `include_from`: (the file's name (the digest lists its base name), `read(path) -> bytes`) for the
        files its `include`s name (dsl.includes); without it an include is an error. `load`
        reads them from the file's folder, `from_sources` from the sources given.
        """
        _refuse_surrogates(text, name)
        external = _external_groups(groups)
        # The checked tree of a source seen before (dsl.tree_cache: no Lark, no parse); only
        # without tools or external groups, whose checks depend on more than the text.
        cacheable = cache and tools is None and not external
        kept = tree_cache.get(text) if cacheable else None
        raw = source_bytes if source_bytes is not None else text.encode("utf-8")
        assembly = None
        if kept is not None:
            tree, diagnostics = kept
        else:
            from dsl.checker import bidi_warnings, check
            from dsl.parser import parse  # Lark: imported only to parse

            tree = parse(text, name)
            if tools is not None:
                from dsl.schema import as_tool_schemas

                tools = as_tool_schemas(tools)
            if lets.has_lets(tree.statements) or includes.has_includes(tree.statements):
                tree, diagnostics, assembly = _reuse(tree, text, name, raw, include_from, tools, external)
            else:
                diagnostics = check(tree, tools, external)
            if not text.isascii():
                diagnostics = diagnostics + bidi_warnings(text)
            errors = [d for d in diagnostics if d.severity == "error"]
            if errors:
                raise PolicyError(name, text, diagnostics, included=assembly.texts if assembly is not None else {})
            if cacheable and assembly is None:
                tree_cache.put(text, tree, diagnostics)
        written = None
        if lets.has_lets(tree.statements):  # the tree kept has its lets: expanded again (no error, no check)
            expansion = lets.expand(tree.statements)
            tree, written = expansion.tree, expansion.written
        elif assembly is not None:
            tree = ast.PolicyFile(assembly.statements)
        decl = tree.of_type(ast.PolicyDecl)
        groups = {
            g.name: tuple(dict.fromkeys(i.value for i in g.members.items))
            for g in tree.of_type(ast.GroupDecl)
        }
        # The external groups a clause names (the checker refused a name both define), with
        # their members as the requirements list them; the digest covers exactly these.
        used = {
            group: tuple(sorted(set(external[group])))
            for group in sorted(_named_groups(tree))
            if external and group in external and group not in groups
        }
        groups.update(used)
        lines = source_lines(text)
        rule_nodes = tree.of_type(ast.Rule)
        if written is None and assembly is None:
            rules = [compile_rule(i, rule, groups, lines) for i, rule in enumerate(rule_nodes)]
        else:
            rules = [_compile_reused(i, rule, written[i] if written else rule, groups, (assembly and assembly.lines_of(rule.span)) or lines)
                     for i, rule in enumerate(rule_nodes)]
        _deduplicate_ids(rules, [any(isinstance(c, ast.IdClause) for c in r.clauses) for r in rule_nodes])
        default = DefaultEffect()
        for d in tree.of_type(ast.DefaultDecl):
            reason = d.reason or next((c.text for c in d.clauses if isinstance(c, ast.ReasonClause)), None)
            reqs = requirements_of(d.clauses, groups) if d.effect == "ask" else None
            default = DefaultEffect(effect=d.effect, reason=reason, requirements=reqs)
        if default.effect == "ask" and default.requirements is None:
            default = DefaultEffect(effect="ask", reason=default.reason, requirements=requirements_of((), groups))
        # every file read, the loaded one first under its base name (dsl.sources.root_path)
        sources = (tuple(PolicyFile(path, data) for path, data in assembly.sources) if assembly is not None
                   else (PolicyFile(root_path(include_from[0] if include_from else name), raw),))
        source_digest = sources_digest(sources)
        return cls(
            name=decl[0].name if decl else (default_name or name),
            digest=policy_digest(source_digest, used),
            source_digest=source_digest,
            external_groups=used,
            source_name=name,
            source_text=text,
            rules=rules,
            default=default,
            groups=groups,
            warnings=[d for d in diagnostics if d.severity == "warning"],
            home=next((h.path for h in tree.of_type(ast.HomeDecl)), None),
            sources=sources,
            included=assembly.texts if assembly is not None else None,
        )

    # --- deciding -----------------------------------------------------------------------------

    def rules_for(self, tool: str) -> tuple[CompiledRule, ...]:
        """The rules whose selectors cover `tool`, in file order."""
        return self._index.candidates(tool)

    def evaluate(self, tool: str, args: Mapping[str, Any], context: Mapping[str, Any] | None = None, *,
                 history: Any = None) -> Decision:
        """Decide one call.

        `tool` is the tool's name; `args` its arguments (a JSON object, decoded); `context` what the
        caller knows about the call (`cwd`, `run_id`, ...), a JSON object or None. Raises
        `PolicyInputError` when they are not of those shapes; never raises for a condition that
        does not fit the call (that is recorded in the Decision and fails closed).

        `history`: the earlier calls of the call's run (a `dsl.history.History`: the Gate's index of
        the ledger before this proposal, or `History.from_calls`). None decides with an empty run:
        `run` and `calls()` are empty, `from_tool()` is false and only `context.user_prompt` is a
        source (docs/policy-language.md, "History and provenance"). `reads_history` says whether
        any rule reads it.
        """
        if context is None:
            context = _NO_CONTEXT
        if type(args) is not dict or type(context) is not dict or type(tool) is not str:
            return self._evaluate_checked(tool, args, context, history)
        plan = self._plans.get(tool)
        if plan is None:
            plan = self._plan(tool)
        steps, memo, fast, constant = plan
        if constant is not None:  # no rule of the tool has a condition
            return constant
        # Env(tool, args, context, vars, home, trace, memo, history), without NamedTuple's __new__
        env = _new_tuple(Env, (tool, args, context, _NO_VARS, self.home, None, {} if memo else None, history))
        matched: list[int] = []  # positions of the rules that held
        if fast is not None:
            try:
                start = fast(env, matched.append)  # -1: every rule was decided; else the first rule that raised
            except Exception:  # a defect in what the plan reads: the predicates decide every rule
                start = 0
                matched.clear()
            if start < 0:
                key = tuple(matched)  # positions, and (position, error, False) for a rule the plan saw raise
                decision = self._decisions.get(key)
                return decision if decision is not None else self._decision_for(key)
            steps = steps[start:]
        return self._run(steps, env, matched)

    def _evaluate_checked(self, tool: Any, args: Any, context: Any, history: Any = None) -> Decision:
        """`evaluate` of a call whose tool, arguments or context is not exactly a str and two
        dicts: refused when it is not of those shapes (a subclass is), else decided by the rules'
        predicates (the generated plans read exact dicts only)."""
        if not isinstance(tool, str):
            raise PolicyInputError(f"the tool name must be a string, not {type(tool).__name__}")
        if not isinstance(args, dict):
            raise PolicyInputError(f"the arguments must be a JSON object, not {_json_kind(args)}")
        if not isinstance(context, dict):
            raise PolicyInputError(f"the context must be a JSON object, not {_json_kind(context)}")
        steps, memo, _, _ = self._plans.get(tool) or self._plan(tool)
        env = _new_tuple(Env, (tool, args, context, _NO_VARS, self.home, None, {} if memo else None, history))
        return self._run(steps, env, [])

    def _run(self, steps, env: Env, matched: list) -> Decision:
        """The rules of `steps` by their predicates, after those in `matched` (see `evaluate`)."""
        append = matched.append
        for test, order in steps:
            if test is None:
                append(order)
                continue
            # Nothing escapes a condition: an EvalError is the language's error, and any other
            # exception (a defect in a subject or an operator) is recorded as one. The try costs
            # nothing until something raises.
            try:
                holds = test(env)
            except EvalError as exc:
                return self._with_errors(steps, env, matched, order, exc.message)
            except RecursionError:
                return self._with_errors(steps, env, matched, order, _TOO_DEEP)
            except Exception as exc:
                return self._with_errors(steps, env, matched, order, failure_message(exc))
            if holds is True:
                append(order)
            elif holds is not False:  # pragma: no cover - the compiled predicates yield booleans
                return self._with_errors(steps, env, matched, order, None, holds)
        key = tuple(matched)  # positions, and (position, error, False) for a rule the plan saw raise
        decision = self._decisions.get(key)
        if decision is None:
            return self._decision_for(key)
        return decision

    def _with_errors(self, steps, env: Env, matched: list[int], at: int, error: str | None, holds: Any = False) -> Decision:
        """`evaluate` from the rule at position `at`, whose condition raised `error` (or yielded
        `holds`, neither true nor false), on: every outcome is recorded. The Decision depends only
        on which rules held and which errored with what message, so it is kept under that key
        too (the decision cache of `evaluate`), unless the messages are long (a message quotes
        the value that failed, and the cache must stay small)."""
        key: list = list(matched)  # an int for a rule that held; (position, error, holds) otherwise
        started = False
        for test, order in steps:
            if not started:
                if order != at:
                    continue
                started = True
            else:
                error, holds = None, True
                if test is not None:
                    try:
                        holds = test(env)
                    except EvalError as exc:
                        holds, error = False, exc.message
                    except RecursionError:
                        holds, error = False, _TOO_DEEP
                    except Exception as exc:
                        holds, error = False, failure_message(exc)
                if holds is True:
                    key.append(order)
                    continue
                if not holds and error is None:
                    continue
            key.append((order, error, holds))
        return self._decision_for(tuple(key))

    def _decision_for(self, key: tuple) -> Decision:
        """The Decision for `key` (see `_with_errors`), kept in the decision cache unless its
        error messages are long (a message quotes the value that failed)."""
        try:
            decision = self._decisions.get(key)
        except TypeError:  # pragma: no cover - a predicate yielded an unhashable non-boolean
            decision, key = None, None
        if decision is not None:
            return decision
        hits, rules = self._hits, self.rules
        outcomes = []
        errors_chars = 0
        for entry in (key or ()):
            if type(entry) is int:
                outcomes.append(hits[entry])
                continue
            order, error, holds = entry
            errors_chars += len(error or "")
            rule = rules[order]
            outcomes.append(
                RuleOutcome(
                    rule=rule.rule_id,
                    line=rule.line,
                    effect=rule.effect,
                    counted=holds or rule.effect != "allow",  # an error never allows
                    error=error,
                    reason=rule.reason,
                    condition=rule.condition_text,
                )
            )
        decision = decide(outcomes, self._requirements, self.default, self.name, self.digest)
        if key is not None and errors_chars <= _CACHED_ERRORS_CHARS:
            if len(self._decisions) >= RuleIndex.CACHE_LIMIT:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _plan(self, tool: str) -> tuple[tuple[tuple[Any, int], ...], bool, Any, Decision | None]:
        """(test, position) for every rule that covers `tool`, in file order; whether a call of
        the tool needs an Env.memo (some rule shares path()/url()/shell() values); the rules
        written as one function (`compile_plan`, None when it would only call the predicates);
        and the Decision of every call of the tool when none of its rules has a condition (the
        default when none covers it), else None; kept per tool name."""
        rules = self._index.candidates(tool)
        key = tuple(rule.order for rule in rules)
        plan = self._compiled.get(key)
        if plan is None:
            # written once per set of candidate rules: the names a glob covers share it
            constant = self._decision_for(key) if all(rule.test is None for rule in rules) else None
            plan = (tuple((rule.test, rule.order) for rule in rules), any(rule.uses_memo for rule in rules), compile_plan(rules), constant)
            if len(self._compiled) >= RuleIndex.CACHE_LIMIT:
                self._compiled.clear()
            self._compiled[key] = plan
        # Keyed by the call's tool name: an entry costs its name (the plan is shared), so names
        # longer than _CACHED_TOOL_NAME are not kept and the cache stays under about 1.5 MB.
        if len(tool) <= _CACHED_TOOL_NAME:
            if len(self._plans) >= RuleIndex.CACHE_LIMIT:
                self._plans.clear()
            self._plans[tool] = plan
        return plan

    def __repr__(self) -> str:
        return f"Policy(name={self.name!r}, rules={len(self.rules)}, digest={self.digest[:12]})"


def _reuse(tree: ast.PolicyFile, text: str, name: str, raw: bytes, include_from, tools, external):
    """Parse → check for a file with includes or lets (dsl.includes, dsl.lets): (the statements
    read, lets not yet expanded; every diagnostic; the Assembly of the files read, or None when
    it includes nothing). Raises PolicyError for an include that cannot be read."""
    assembly = None
    statements = tree.statements
    if includes.has_includes(statements):
        if include_from is None:
            first = next(s for s in statements if type(s) is ast.IncludeDecl)
            raise PolicyError(name, text, (Diagnostic("error", "an include needs the file the policy is loaded from", first.span,
                                                      "load the policy with Policy.load(path) (or Policy.from_sources)"),))
        assembly = includes.gather(tree, root_path(include_from[0]), raw, name, include_from[1])
        if any(d.severity == "error" for d in assembly.diagnostics):
            raise PolicyError(name, text, lets.sort(assembly.diagnostics, assembly.order), included=assembly.texts)
        statements = assembly.statements
    expansion = lets.expand(statements)
    diagnostics = lets.check(expansion, tools, external)
    if assembly is not None:
        diagnostics = lets.sort(diagnostics + assembly.diagnostics, assembly.order)
    return ast.PolicyFile(statements), diagnostics, assembly


def _compile_reused(order: int, rule: ast.Rule, written: ast.Rule, groups, lines: list[str]) -> CompiledRule:
    """`compile_rule` of a rule whose lets are expanded (`rule`) or that an included file holds
    (`lines`: that file's): its id and recorded condition text are those of the rule as written."""
    compiled = compile_rule(order, rule, groups, lines)
    if written is rule:
        return compiled
    from dsl.compiler import _source_slice
    from dsl.rule_ids import implicit_id

    explicit = any(isinstance(c, ast.IdClause) for c in written.clauses)
    return dataclasses.replace(
        compiled,
        rule_id=compiled.rule_id if explicit else implicit_id(written, lines),
        condition_text=_source_slice(lines, written.condition.span) if written.condition is not None else None,
    )


EXTERNAL_GROUPS_FORMAT = "countersign-policy-groups/1"


def policy_digest(source_digest: str, external_groups: Mapping[str, tuple[str, ...]]) -> str:
    """What decisions record as `policy_digest`, hex SHA-256 (64 lowercase digits).

    `source_digest` is the hex SHA-256 of the policy file's bytes; `external_groups` the external
    (roster) groups the policy names in an `approvers N from GROUP`, name → identities. Without
    any, the digest is `source_digest` itself (what every policy's digest was before roster
    groups). With some, it is the SHA-256 of the ASCII bytes of the JSON text

        {"format":"countersign-policy-groups/1","groups":{"NAME":["ID",...],...},"source":"<source_digest>"}

    with object keys in code-point order, each group's identities deduplicated and in code-point
    order, no whitespace, and every character outside ASCII written as a JSON `\\uXXXX` escape
    (UTF-16 code units, lowercase hex: Python's `json.dumps(..., sort_keys=True,
    separators=(",", ":"), ensure_ascii=True)`, RFC 8259). Only the groups the policy names count:
    a change to another roster group leaves the digest as it was, a change to a named group's
    members changes it (docs/policy-language.md, "group")."""
    if not external_groups:
        return source_digest
    canonical = {
        "format": EXTERNAL_GROUPS_FORMAT,
        "groups": {name: sorted(set(members)) for name, members in external_groups.items()},
        "source": source_digest,
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _external_groups(groups: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]] | None:
    """`groups` as name → identities (first occurrence kept, order kept), or None. Raises
    TypeError when it is not a mapping of str to an iterable of str (a lone str is refused: it
    would read as its characters)."""
    if groups is None:
        return None
    if not isinstance(groups, Mapping):
        raise TypeError(f"groups must be a mapping of group names to identities, not {type(groups).__name__}")
    out: dict[str, tuple[str, ...]] = {}
    for group, members in groups.items():
        if not isinstance(group, str):
            raise TypeError(f"a group name must be a string, not {type(group).__name__}")
        identities = None if isinstance(members, (str, bytes)) else tuple(members)
        if identities is None or not all(isinstance(m, str) for m in identities):
            raise TypeError(f"the members of group {group!r} must be strings (an iterable of identities)")
        out[group] = tuple(dict.fromkeys(identities))
    return out


def _named_groups(tree: ast.PolicyFile) -> set[str]:
    """Every group an `approvers N from GROUP` of a rule or the default names."""
    statements = tree.of_type(ast.Rule) + tree.of_type(ast.DefaultDecl)
    return {c.group for s in statements for c in s.clauses if isinstance(c, ast.ApproversClause) and c.group is not None}


def _deduplicate_ids(rules: list[CompiledRule], explicit: list[bool]) -> None:
    """Give every rule without an `id` clause an id no other rule has: its `dsl.rule_ids` id
    (`deny-1a2b3c4d`), then `deny-1a2b3c4d.2`, `.3` for more rules of the same text, skipping any
    id a rule declares itself. (Ids key the requirements
    of ask rules, so two rules sharing one would silently swap requirements.) Explicit ids are
    unique already: the checker refuses a repeated one. `explicit[i]`: rule i has an `id` clause."""
    taken = {rule.rule_id for rule, own in zip(rules, explicit) if own}
    for rule, own in zip(rules, explicit):
        if own:
            continue
        base, candidate, n = rule.rule_id, rule.rule_id, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}.{n}"
        taken.add(candidate)
        object.__setattr__(rule, "rule_id", candidate)


def _refuse_surrogates(text: str, name: str) -> None:
    """A str holding a lone surrogate (U+D800..U+DFFF) has no UTF-8 bytes, so it has no digest.
    Such text cannot come from a file; refuse it with a diagnostic rather than a UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        before = text[: exc.start]
        line = before.count("\n") + 1
        column = exc.start - (before.rfind("\n") + 1) + 1
        raise PolicyError(name, text, (Diagnostic("error", "the policy text holds a lone surrogate, which is not valid Unicode", Span.point(line, column)),)) from None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__
