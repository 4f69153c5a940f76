"""A least-recently-used cache bounded in bytes, for values computed from a call's input.

A cache keyed by what calls bring (shell texts, tool names, working directories) must not grow
with them: a 99 KB command parses into about 10 MB of Commands, and an entry count alone let a
few hundred such texts take gigabytes. `BoundedCache` charges each entry an estimate of its size
in bytes (`estimate_size`: `sys.getsizeof` of the key, the value and every object reachable from
it, each counted once) and evicts the least recently used entries while the total exceeds its
budget. An entry larger than the whole budget is not kept (it is computed again when asked).

The budgets of the caches of `dsl` (see `BUDGETS`) add up to 64 MB: the shell parses of
`dsl.compiler` and `dsl.subjects.shell`, the rule candidates of each policy's `RuleIndex`, the
compiled path patterns of relative globs (which include the call's cwd), the `path()` values
of short texts, and the paths the generated plans make from a command's words.

A hit costs one dict lookup and one `move_to_end` of an OrderedDict (both in C). Writes take a
lock; reads do not (a concurrent eviction makes a read a miss, never a wrong value).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Any, Hashable

MB = 1 << 20

# bytes, by cache name; together 64 MB
BUDGETS = {
    "compiler.shell": 24 * MB,  # dsl.compiler._SHELL_CACHE: _Shell (Commands and programs) by text
    "subjects.shell": 8 * MB,  # dsl.subjects.shell: tuple of Commands by text (parse_shell: the generic predicates)
    "rule_index": 4 * MB,  # dsl.compiler.RuleIndex: candidate rules by tool name (each policy)
    "path_glob": 4 * MB,  # dsl.subjects.paths: compiled path patterns by segments (cwd included)
    # The paths of a session repeat (its files, its cwd): the 4,519 real calls of the corpus
    # keep about 5.6 MB of path() values and 3.7 MB of the plans' paths
    "paths": 11 * MB,  # dsl.subjects.paths: path() values by (text, cwd, home), short texts only
    "path_bases": 1 * MB,  # dsl.subjects.paths: a cwd's or a home's segments and text, the base of every word
    "plan_paths": 9 * MB,  # dsl.compiler._ITEM_PATHS: the plans' path(word, c.cwd) values and secrecy
    "url_hosts": 1 * MB,  # dsl.subjects.urls: a URL's host as fetchers resolve it (UTS #46, IDNA, IPv4)
    "glob_secret": 2 * MB,  # dsl.subjects.secrets: whether a search root or a glob pattern may reach a secret
}

_ATOMS = (str, bytes, int, float, bool, type(None))


def estimate_size(obj: Any, seen: set[int] | None = None) -> int:
    """An estimate, in bytes, of the memory `obj` holds: `sys.getsizeof` of it and of every
    object reachable through tuples, lists, sets, dicts, `__slots__` and `__dict__`, each object
    counted once (`seen`: ids already counted, shared with the caller to count a key and its
    value together). Functions, classes and modules count as their own size only (they are the
    policy's, not the entry's). Time linear in the number of objects reached."""
    seen = set() if seen is None else seen
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, _ATOMS):
            continue
        if isinstance(o, (tuple, list, set, frozenset)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, type) or callable(o):
            continue
        else:
            for klass in type(o).__mro__:
                for name in getattr(klass, "__slots__", ()):
                    value = getattr(o, name, None)
                    if value is not None:
                        stack.append(value)
            d = getattr(o, "__dict__", None)
            if d is not None:
                stack.append(d)
    return total


def char_bytes(text: str) -> int:
    """The bytes the characters of `text` take in a CPython str: one each when it is ASCII, at
    most four otherwise (PEP 393's compact strings are 1, 2 or 4 bytes a character). Callers
    that estimate an entry's cost from its texts' lengths use it, so that a non-ASCII text is
    not counted at a quarter of its size."""
    return len(text) if text.isascii() else 4 * len(text)


class BoundedCache:
    """A least-recently-used mapping whose entries' estimated sizes total at most `budget`
    bytes. `get(key)` returns the value or None (None is never stored); `put(key, value, cost)`
    stores it, `cost` in bytes (estimated with `estimate_size` when not given)."""

    __slots__ = ("name", "budget", "bytes", "_data", "_costs", "_lock")

    def __init__(self, budget: int, name: str = ""):
        if budget <= 0:
            raise ValueError("a cache's budget must be a positive number of bytes")
        self.name = name
        self.budget = budget
        self.bytes = 0  # the estimated size of what is kept
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._costs: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        value = self._data.get(key)
        if value is not None:
            try:
                self._data.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile: still the right value
                pass
        return value

    def lookups(self) -> tuple[Any, Any]:
        """(find, touch): the two C-level calls `get` is made of, for a caller on a hot path that
        cannot afford a Python-level call: `value = find(key)` (None on a miss), then on a hit
        `touch(key)`, which marks it most recently used (KeyError: another thread evicted it
        meanwhile; the value found is still right). Bound to this cache for its lifetime."""
        return self._data.get, self._data.move_to_end

    def put(self, key: Hashable, value: Any, cost: int | None = None) -> None:
        if value is None:
            raise ValueError("None cannot be cached (it means a miss)")
        if cost is None:
            seen: set[int] = set()
            cost = estimate_size(key, seen) + estimate_size(value, seen)
        cost += 100  # the OrderedDict's node and the two dict slots
        if cost > self.budget:
            return
        with self._lock:
            old = self._costs.pop(key, None)
            if old is not None:
                self.bytes -= old
                del self._data[key]
            while self._data and self.bytes + cost > self.budget:
                evicted, _ = self._data.popitem(last=False)
                self.bytes -= self._costs.pop(evicted)
            self._data[key] = value
            self._costs[key] = cost
            self.bytes += cost

    def pop(self, key: Hashable) -> None:
        """Forget `key` (nothing when it is not kept)."""
        with self._lock:
            cost = self._costs.pop(key, None)
            if cost is not None:
                self.bytes -= cost
                del self._data[key]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._costs.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"BoundedCache({self.name!r}, {len(self._data)} entries, {self.bytes:,} of {self.budget:,} bytes)"
