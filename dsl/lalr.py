"""The policy grammar's LALR(1) parse of valid text, run by our own loop over Lark's tables.

Lark builds the grammar's parse table and the callbacks that make each rule's AST node
(`dsl.parser._lark`, transformer `_Builder`). `Lark.parse` then spends most of a large policy's
load in its general-purpose loop: a policy of 1,000 rules is about 16,500 tokens and 45,000
reductions, two thirds of them unit steps such as `term: unary`, each one a Python call or
more. `TableParser.parse` runs the same table, with the same transformer methods, in one loop made
for this case:

* the contextual lexer (lark/lexer.py: `ContextualLexer`, `BasicLexer`, `_create_unless`), built
  per parser state by the same rules: the terminals the state accepts plus the ignored ones, tried
  in Lark's order (priority, longest possible match, longest pattern, name: Lark's grammar
  reference, "Notes for when using a lexer"); a regular-expression terminal whose match is
  exactly a string terminal of the same state and priority takes that terminal's type
  (`allow` read by NAME is ALLOW where ALLOW may stand); line and column counted as Lark's
  `LineCounter` does (a line starts after each "\\n"; columns from 1);
* a unit reduction whose Lark callback only hands its one child up (a `?rule` with one child,
  nothing to filter or inline: `ExpandSingleChild` alone) costs a table lookup and no call, and a
  chain of them (`unary: operand`, `term: unary`, ... `expr: or_expr`) one lookup;
* the other reductions make their value as Lark's callbacks do (`_reducer`), with Lark's own plan
  of each rule's children, but an inlined `_rule` (`_clause`, `x*`) is a plain list, not a Tree;
* tokens are `lark.Token`s made without Lark's backward-compatible constructor.

It is for text that parses. On anything else (a character no terminal of the state matches, a
token the table has no action for, a keyword glued to the letters after it, an error raised by a
callback) it raises, and the caller (`dsl.parser.parse`) parses the text again with Lark itself,
which says what is wrong exactly as before. So where this parser returns a tree it must be Lark's
tree, and tests/test_parser_table.py checks that on generated and sample policies.

Linear: each token is one match of the state's scanner (Lark's own terminal patterns) at the
current position, and each reduction pops what it pushed. The scanners are built once per set of
terminals a state accepts (44 sets among the grammar's 197 states; a policy of 1,000 rules meets 27).
"""

from __future__ import annotations

import re
from typing import Callable

from lark import Lark, Token, Tree
from lark.parse_tree_builder import ChildFilterLALR, ChildFilterLALR_NoPlaceholders, maybe_create_child_filter
from lark.parsers.lalr_analysis import Shift


MAX_CHAINS = 4096  # (state, state, terminal) -> state entries: under 1 MB (a policy of 1,000 rules uses 85)


class Unhandled(Exception):
    """The text is not one this parser reads: Lark must parse it (and report its error)."""


class _Token(Token):
    """A `lark.Token` whose slots `TableParser.parse` fills itself (Lark's constructor, which also
    accepts older signatures, costs more than the rest of a token's lexing)."""

    __slots__ = ()


class _Scanner:
    """The lexer of one parser state: one pattern, alternatives in Lark's order, and the types a
    regular-expression terminal's exact match turns into (`_create_unless`)."""

    __slots__ = ("match", "keywords")

    def __init__(self, match: Callable, keywords: dict[str, dict[str, str]]):
        self.match = match
        self.keywords = keywords


class TableParser:
    """Parses text with `lark`'s tables and callbacks (an LALR Lark with a transformer and the
    contextual lexer). `checked_words`: the string terminals that must not be followed by a
    letter, digit or `_` (a keyword glued to a word raises `Unhandled`); `comment`: the name of
    the ignored terminal whose tokens `parse` returns; `space`: the ignored terminal of white
    space, which no other terminal may match at its start (so that skipping it before the
    state's own alternatives, in the same match, reads what Lark reads).

    Raises `Unhandled` at construction when Lark's objects are not of the shape this loop knows
    (another Lark version may store them otherwise): the caller then uses Lark alone."""

    def __init__(self, lark: Lark, checked_words: frozenset[str], comment: str, space: str):
        try:
            inner = lark.parser.parser.parser  # ParsingFrontend -> LALR_Parser -> _Parser
            table, callbacks = inner.parse_table, inner.callbacks
            conf = lark.lexer_conf
            terminals, ignore, flags = list(conf.terminals), tuple(conf.ignore), conf.g_regex_flags
            start, end = table.start_states["start"], table.end_states["start"]
            transformer, tree_class = lark.options.transformer, lark.options.tree_class or Tree
            if not (lark.options.maybe_placeholders and lark.options.parser == "lalr"):
                raise TypeError("placeholders and LALR expected")
        except (AttributeError, KeyError, TypeError) as exc:
            raise Unhandled(f"Lark's parser is not laid out as expected: {exc!r}") from None
        if conf.use_bytes or conf.postlex is not None or any(isinstance(k, str) for k in callbacks):
            raise Unhandled("token callbacks, a postlexer or bytes input")
        if transformer is None or any(hasattr(transformer, t.name) for t in terminals):
            raise Unhandled("no transformer, or one with token callbacks")
        if any(t.pattern.type == "str" and t.pattern.flags for t in terminals):
            raise Unhandled("a string terminal with flags")
        if space not in ignore or comment not in ignore:
            raise Unhandled("no such ignored terminals")
        self._terminals = {t.name: t for t in terminals}
        self._ignore = ignore
        self._flags = flags
        self._words = checked_words
        self._comment = comment
        self._space = next(t for t in terminals if t.name == space)
        self._start, self._end = start, end
        # Each state: terminal or rule name -> next state (a shift or a goto, an int) or the
        # reduction (number of children, name of the rule, what makes its value: `_reducer`).
        self._actions: dict[int, dict[str, object]] = {}
        reductions: dict[object, tuple] = {}
        for state, row in table.states.items():
            actions = {}
            for name, (action, arg) in row.items():
                if action is Shift:
                    actions[name] = arg
                else:
                    if arg not in reductions:
                        reductions[arg] = (len(arg.expansion), arg.origin.name, _reducer(arg, transformer, tree_class))
                    actions[name] = reductions[arg]
            self._actions[state] = actions
        if not all(type(s) is int for row in self._actions.values() for s in row.values() if type(s) is not tuple):
            raise Unhandled("parser states that are not ints")
        self._accepts = {state: frozenset(n for n in row if n in self._terminals) for state, row in table.states.items()}
        self._scanners: dict[int, _Scanner] = {}
        self._by_accepts: dict[frozenset[str], _Scanner] = {}
        self._chains: dict[tuple[int, int, str], int] = {}

    # --- the lexer of a state -----------------------------------------------------------------

    def _scanner(self, state: int) -> _Scanner:
        """The scanner of `state`, built the first time, shared by the states that accept the
        same terminals (as Lark's contextual lexer shares its lexers)."""
        accepts = self._accepts[state]
        scanner = self._by_accepts.get(accepts)
        if scanner is None:
            scanner = self._by_accepts[accepts] = self._build_scanner(sorted(accepts))
        self._scanners[state] = scanner
        return scanner

    def _build_scanner(self, accepts: list[str]) -> _Scanner:
        """Lark's lexer for a state accepting `accepts` (module docstring)."""
        names = dict.fromkeys(accepts + [n for n in self._ignore if n in self._terminals])
        terms = sorted((self._terminals[n] for n in names),
                       key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
        strings = [t for t in terms if t.pattern.type == "str"]
        keywords: dict[str, dict[str, str]] = {}
        embedded = set()
        for r in terms:
            if r.pattern.type != "re":
                continue
            for s in strings:
                if s.priority != r.priority:
                    continue
                m = re.match(r.pattern.to_regexp(), s.pattern.value, self._flags)
                if m and m.group(0) == s.pattern.value:
                    keywords.setdefault(r.name, {})[s.pattern.value] = s.name
                    if s.pattern.flags <= r.pattern.flags:
                        embedded.add(s.name)
        alternatives = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terms
                                if t.name not in embedded and t is not self._space)
        # white space first, atomic: where no alternative follows it, the match fails at once
        pattern = f"(?>{self._space.pattern.to_regexp()})?(?:{alternatives})"
        return _Scanner(re.compile(pattern, self._flags).match, keywords)

    def _chain(self, below: int, top: int, kind: str) -> int:
        """The state on top of `below` after every pass-through reduction `top` and those after
        it make before `kind` (each replaces the top state by the goto of `below` on its rule);
        kept in `_chains`, at most MAX_CHAINS of them."""
        actions, state = self._actions, top
        while True:
            action = actions[state].get(kind)
            if type(action) is not tuple or action[2] is not None:
                break
            state = actions[below][action[1]]
        if len(self._chains) < MAX_CHAINS:
            self._chains[(below, top, kind)] = state
        return state

    def _only_space(self, text: str, pos: int) -> bool:
        m = re.compile(self._space.pattern.to_regexp(), self._flags).match(text, pos)
        return m is not None and m.end() == len(text)

    # --- the parse ----------------------------------------------------------------------------

    def parse(self, text: str) -> tuple[object, list[Token]]:
        """The tree Lark's callbacks build from `text`, and the tokens of the comment terminal in
        source order. Raises `Unhandled` where Lark would raise (or might: the caller asks Lark),
        and whatever a callback raises."""
        actions, words, comment, chains, keep = self._actions, self._words, self._comment, self._chains, _KEEP
        end_state = self._end
        scanners, scanner_of = self._scanners, self._scanner
        new, cls, count_in, last_in = str.__new__, _Token, text.count, text.rfind
        comments: list[Token] = []
        states = [self._start]
        values: list = []
        pos, line, line_start, size = 0, 1, 0, len(text)
        last = None
        while True:
            # next token, lexed in the state the parser is in (as Lark's contextual lexer), after
            # the white space before it
            state = states[-1]
            scan = scanners.get(state) or scanner_of(state)
            m = scan.match(text, pos)
            if m is not None:
                kind = m.lastgroup
                start, stop = m.start(kind), m.end()
                if start != pos and (newlines := count_in("\n", pos, start)):
                    line += newlines
                    line_start = last_in("\n", pos, start) + 1
                tok = new(cls, value := m.group(kind))
                tok.type, tok.value, tok.start_pos, tok.end_pos = kind, value, start, stop
                tok.line = tok.end_line = line
                tok.column = start - line_start + 1
                tok.end_column = stop - line_start + 1
                if "\n" in value:  # a token of several lines (none in the policy grammar)
                    line += value.count("\n")
                    line_start = start + value.rindex("\n") + 1
                    tok.end_line, tok.end_column = line, stop - line_start + 1
                pos = stop
                if kind == comment:
                    comments.append(tok)
                    continue
                retype = scan.keywords.get(kind)
                if retype is not None:
                    tok.type = kind = retype.get(value, kind)
                elif kind in words and pos < size and (text[pos] == "_" or (text[pos].isascii() and text[pos].isalnum())):
                    raise Unhandled("a keyword glued to a word")
                last = tok
            elif pos == size or self._only_space(text, pos):
                kind = "$END"
                tok = Token.new_borrow_pos("$END", "", last) if last is not None else Token("$END", "", 0, 1, 1)
            else:
                raise Unhandled(f"no terminal matches at {pos}")
            # feed it: reduce as the table says, then shift it (or accept at the end)
            while True:
                action = actions[states[-1]].get(kind)
                if action is None:
                    raise Unhandled(f"unexpected {kind}")
                if type(action) is int:
                    if kind == "$END":
                        raise Unhandled("a shift of the end")  # Lark asserts it never happens
                    states.append(action)
                    values.append(tok)
                    break
                count, origin, callback = action
                if callback is None:  # a pass-through: its one child stays, the state changes
                    if kind == "$END":
                        states[-1] = actions[states[-2]][origin]
                        if states[-1] == end_state:
                            return values[-1], comments
                    else:  # a chain of them (`term: unary` after `unary: operand` ...) in one step
                        key = (states[-2], states[-1], kind)
                        top = chains.get(key)
                        states[-1] = top if top is not None else self._chain(*key)
                    continue
                if count:
                    children = values[-count:]
                    del states[-count:]
                    del values[-count:]
                else:
                    children = []
                value = children if callback is keep else callback(children)
                states.append(actions[states[-1]][origin])
                values.append(value)
                if kind == "$END" and states[-1] == end_state:
                    return values[-1], comments


_KEEP = object()  # the reduction's value is its list of children (a `_rule` its parent inlines)


def _reducer(rule, transformer, tree_class):
    """What makes the value of a reduction by `rule` from its children (a list, popped off the
    stack, which nothing else holds), as Lark's callback for it would (lark/parse_tree_builder.py,
    `ParseTreeBuilder` with `maybe_placeholders`): the children filtered (an absent `[x]` is None,
    the children of an inlined `_rule` take its place, tokens are kept), then the transformer's
    method named after the rule's alias or name, or, for a `?rule` left with one child, that
    child. Returns None for a pass-through (nothing to do), `_KEEP` for a `_rule` whose value is
    its children, else a function of the children. Raises Unhandled for a rule of another kind."""
    options = rule.options
    name = rule.alias or options.template_source or rule.origin.name
    method = getattr(transformer, name, None)
    if method is not None and getattr(method, "visit_wrapper", None) is not None:
        raise Unhandled(f"a transformer method with a visit wrapper: {name}")
    inlined = rule.origin.name.startswith("_")
    if inlined and (method is not None or rule.alias or options.expand1):
        raise Unhandled(f"an inlined rule with its own callback: {rule}")
    include, trailing = _child_filter(rule)
    single = options.expand1 and not rule.alias
    if include is None and single and len(rule.expansion) == 1:
        return None  # `?a: b`: b's value is a's (Lark: ExpandSingleChild and nothing else)
    if method is None and not inlined:
        method = lambda children: tree_class(name, children)  # noqa: E731 - Lark's default node
    if include is None:
        if inlined:
            return _KEEP
        if not single:
            return method
        return lambda children: children[0] if len(children) == 1 else method(children)

    def reduce(children):
        kept = []
        for index, spread, nones in include:
            if nones:
                kept += [None] * nones
            if not spread:
                kept.append(children[index])
            elif kept:
                kept += children[index]
            else:  # the inlined list itself, grown in place: a left-recursive `x*` stays linear
                kept = children[index]
        if trailing:
            kept += [None] * trailing
        if inlined:
            return kept
        return kept[0] if single and len(kept) == 1 else method(kept)

    return reduce


def _child_filter(rule) -> tuple[list[tuple[int, bool, int]] | None, int]:
    """Lark's plan for a rule's children (`maybe_create_child_filter`): (the index of each child
    kept, whether it is an inlined rule whose children take its place, how many Nones go before
    it), and the Nones after the last; (None, 0) when the children are kept as they are."""
    plan = maybe_create_child_filter(rule.expansion, rule.options.keep_all_tokens, False, rule.options.empty_indices)
    if plan is None:
        return None, 0
    if plan.func is ChildFilterLALR:
        include, trailing = plan.args
        return list(include), trailing
    if plan.func is ChildFilterLALR_NoPlaceholders:
        (include,) = plan.args
        return [(index, spread, 0) for index, spread in include], 0
    raise Unhandled(f"a child filter of another kind: {plan!r}")
