"""`include "FILE.policy"`: another file's statements, read in place of the include.

    include "common/mail.policy"     # its lets, groups and rules, as if written here

`gather(tree, ...)` replaces every include of a parsed file by the statements of the file it names,
recursively, and returns them with the bytes of every file it read. The rules of the language
(docs/policy-language.md, "let and include"):

* The path is relative to the folder of the file that holds the include, written with `/`, and
  names a `.policy` file; an absolute path or a backslash is an error. (Relative paths keep a
  policy and its includes movable together, and the digest below independent of where they are.)
* Inclusion is textual, in order: a file's statements stand where it is included, so a let it
  defines is visible after the include. A file included a second time (from anywhere) is not read
  again: its statements stand once, at its first include. An include that would include a file
  that is being included (a cycle), a missing or unreadable file, and a file that is not UTF-8 or
  does not parse are errors at the include's `file:line:col`; an error inside an included file is
  reported at that file's `line:col`.
* The files together form one policy: `policy "name"`, `default` and `home` may be written once in
  all of them (a second is an error, wherever it is: no silent precedence), group names, let names
  and rule ids are unique across all of them.
* At most MAX_FILES files in all.

The digest (`files_digest`, which is `dsl.sources.sources_digest`: one definition for the loader
and the ledger that pins a policy) covers every file read: for a file that includes nothing it is
the SHA-256 of its bytes, as it always was; otherwise the SHA-256 of the ASCII JSON text

    {"files":[["PATH","SHA256"],...],"format":"countersign-policy-files/1"}

with one [path, hex SHA-256 of the bytes] per file in the order read (the loaded file first, under
its base name: `dsl.sources.root_path`), PATH of an included file relative to the loaded file's
folder with `/` (`lib/mail.policy`, `../shared/x.policy`), no whitespace, keys in code-point order
(Python's `json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=True)`).
`Policy.sources` lists those paths with the bytes (`dsl.sources.PolicyFile`s), so a policy can be
loaded again from them alone (`Policy.from_sources`).
"""

from __future__ import annotations

import dataclasses
import posixpath
from dataclasses import dataclass, field
from typing import Callable

from dsl import ast
from dsl.errors import Diagnostic, FileSpan, PolicyError, Span, source_lines
from dsl.sources import PolicyFile, sources_digest

MAX_FILES = 256


@dataclass
class Assembly:
    """What `gather` returns.

    - `statements`: the loaded file's statements with every include replaced by the statements it
      reads (spans of included files are `FileSpan`s naming them);
    - `sources`: the `PolicyFile` (path relative to the loaded file's folder, bytes) of every file
      read, the loaded file first;
    - `texts`: shown name → text of each included file (the names `FileSpan.file` holds);
    - `diagnostics`: the errors found (none when the statements are complete).
    """

    statements: tuple
    sources: tuple[PolicyFile, ...]
    texts: dict[str, str] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def order(self) -> dict[str, int]:
        """Shown name of an included file → its position among them (for sorting diagnostics)."""
        return {name: i for i, name in enumerate(self.texts)}

    def lines_of(self, span: Span | None) -> list[str] | None:
        """The lines of the included file `span` is in (None for the loaded file)."""
        if type(span) is FileSpan:
            return self._lines.setdefault(span.file, source_lines(self.texts.get(span.file, "")))
        return None

    def __post_init__(self) -> None:
        self._lines: dict[str, list[str]] = {}


def has_includes(statements) -> bool:
    return any(type(s) is ast.IncludeDecl for s in statements)


def gather(tree: ast.PolicyFile, root_path: str, root_bytes: bytes, shown_root: str, read: Callable[[str], bytes]) -> Assembly:
    """Read every include of `tree` (the parsed text of the loaded file).

    `root_path`: the loaded file's name as the digest lists it (its base name); `shown_root`: its
    name in diagnostics; `read(path)`: the bytes of a file given its path relative to the loaded
    file's folder (raises OSError when it cannot). Never raises: problems are `diagnostics`."""
    return _Gatherer(root_path, root_bytes, shown_root, read).run(tree)


class _Gatherer:
    def __init__(self, root_path: str, root_bytes: bytes, shown_root: str, read: Callable[[str], bytes]):
        self.read = read
        self.shown_folder = posixpath.dirname(shown_root.replace("\\", "/"))
        self.sources: dict[str, bytes] = {root_path: root_bytes}
        self.texts: dict[str, str] = {}
        self.diagnostics: list[Diagnostic] = []
        self.root_path = root_path

    def run(self, tree: ast.PolicyFile) -> Assembly:
        statements = self.statements(tree.statements, self.root_path, (self.root_path,))
        return Assembly(tuple(statements), tuple(PolicyFile(p, d) for p, d in self.sources.items()), self.texts,
                        self.diagnostics)

    def error(self, message: str, span: Span, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic("error", message, span, help))

    def statements(self, statements, path: str, stack: tuple[str, ...]) -> list:
        out = []
        for s in statements:
            if type(s) is not ast.IncludeDecl:
                out.append(s)
                continue
            target = self.target(s, path)
            if target is None:
                continue
            if target in stack:
                chain = " → ".join(stack[stack.index(target):] + (target,))
                self.error(f"including '{s.path}' makes a cycle: {chain}", s.path_span,
                           "a file cannot include itself, directly or through others: move what both need into a third file")
                continue
            if target in self.sources:
                continue  # read once, at its first include
            if len(self.sources) >= MAX_FILES:
                self.error(f"a policy reads at most {MAX_FILES} files", s.path_span)
                continue
            out += self.include(s, target, stack)
        return out

    def target(self, s: ast.IncludeDecl, path: str) -> str | None:
        """The path `s` names, relative to the loaded file's folder; None after an error."""
        name = s.path
        if not name.strip():
            self.error("an include names a file", s.path_span, 'for example include "common.policy"')
        elif "\\" in name:
            self.error("an include's path is written with '/'", s.path_span, f'write include "{name.replace(chr(92), "/")}"')
        elif name.startswith("/") or (len(name) > 1 and name[1] == ":"):
            self.error("an include's path is relative to the file that includes it", s.path_span,
                       "a relative path keeps the policy and its includes movable together (and their digest the same)")
        elif not name.endswith(".policy") or "\x00" in name:
            self.error("an include names a .policy file", s.path_span)
        else:
            return posixpath.normpath(posixpath.join(posixpath.dirname(path), name))
        return None

    def include(self, s: ast.IncludeDecl, target: str, stack: tuple[str, ...]) -> list:
        try:
            data = self.read(target)
        except OSError as exc:
            self.error(f"cannot read '{s.path}': {exc.strerror or exc}", s.path_span,
                       f"the path is relative to the folder of the file that includes it ({target} from the loaded file's folder)")
            return []
        shown = posixpath.normpath(posixpath.join(self.shown_folder, target)) if self.shown_folder else target
        self.sources[target] = data
        try:
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            self.texts[shown] = ""
            self.error("the file is not valid UTF-8", FileSpan(line, 1, line, 1, shown))
            return []
        self.texts[shown] = text
        from dsl.checker import bidi_warnings
        from dsl.parser import parse

        try:
            tree = parse(text, shown)
        except PolicyError as exc:
            self.diagnostics += [stamp(d, shown) for d in exc.diagnostics]
            return []
        if not text.isascii():
            self.diagnostics += [stamp(d, shown) for d in bidi_warnings(text)]
        statements = [stamp(st, shown) for st in tree.statements]
        return self.statements(statements, target, stack + (target,))


def stamp(node, file: str):
    """`node` (a statement, clause, expression, diagnostic or span) with every span a `FileSpan`
    of `file`."""
    kind = type(node)
    if kind is Span:
        return FileSpan(node.line, node.column, node.end_line, node.end_column, file)
    if kind is tuple:
        return tuple(stamp(item, file) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type) and kind is not FileSpan:
        changes = {}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            new = stamp(value, file)
            if new is not value:
                changes[f.name] = new
        return dataclasses.replace(node, **changes) if changes else node
    return node


def files_digest(sources) -> str:
    """The digest of the files a policy read, ((path, bytes), ...) the loaded file first (module
    docstring): hex SHA-256, 64 digits. Raises ValueError for no files."""
    return sources_digest([PolicyFile(path, data) for path, data in sources])


def disk_reader(folder) -> Callable[[str], bytes]:
    """`read` for `gather`: files under `folder` (the loaded file's folder)."""
    from pathlib import Path

    base = Path(folder)

    def read(path: str) -> bytes:
        return (base / path).read_bytes()

    return read


def memory_reader(files: dict[str, bytes]) -> Callable[[str], bytes]:
    """`read` for `gather`: files given by their paths (as `Policy.sources` lists them)."""

    def read(path: str) -> bytes:
        try:
            return files[path]
        except KeyError:
            raise FileNotFoundError(2, "No such file among the policy's sources") from None

    return read
