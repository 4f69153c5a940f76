"""The checked syntax tree of a policy source, kept between processes.

A Claude Code hook (`countersign hook claude-code`) is a new process per tool call that loads the
same policy file every time. Parsing it needs Lark (importing it, reading its tables) and the
parse itself: about 40 ms of the hook's cold start, the same work for the same result each time.
So the result of parse → check of a source that has no error (its tree, `dsl.ast.PolicyFile`, and
the warnings) is kept in a file and read back (a few milliseconds) when the same source is loaded
by the same implementation of the language; compiling the tree is done every time, as before.

Key: SHA-256 of the source text and of the implementation's fingerprint: the Python version and
the size and modification time of every module of `dsl`, of the grammar and of Lark's package
(what Python's own bytecode cache compares), so an upgrade or an edit of the language never reads
an older tree.
Only `Policy.load` / `from_text` without tools schemas or external groups use it (their checks
depend on more than the text).

Where, and why it is safe to read: `$XDG_CACHE_HOME/countersign/trees` or
`~/.cache/countersign/trees`, created with mode 700, used only when it and the file belong to this
user and no one else may write them (as the parser's table cache, dsl.parser._parser_cache);
files are written to a temporary name with mode 600 and renamed. The file is a pickle read with
an unpickler that constructs only the classes of `dsl.ast` and `dsl.errors` (so even a file
planted there could build a tree, never call a function); a file that does not read back as a
tree for this key is ignored and the source parsed. COUNTERSIGN_NO_PARSER_CACHE=1 turns it off.

Bounded: an entry is kept only when its pickle is at most MAX_ENTRY_BYTES, and at most
MAX_ENTRIES files are kept (the oldest removed first): 64 MiB at most.
"""

from __future__ import annotations

import hashlib
import os
import sys

MAX_ENTRY_BYTES = 4 << 20
MAX_ENTRIES = 16
SUFFIX = ".tree"
_TAG = b"countersign-policy-tree-1"


def _folder() -> str | None:
    """The cache folder when it is this user's alone (created if missing), else None."""
    if os.environ.get("COUNTERSIGN_NO_PARSER_CACHE"):
        return None
    try:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        if not os.path.isabs(base):
            return None
        folder = os.path.join(base, "countersign")
        os.makedirs(base, exist_ok=True)
        for folder in (folder, os.path.join(folder, "trees")):
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
        return folder if _private(folder) else None
    except (OSError, AttributeError):  # no home, a read-only one, no getuid (Windows)
        return None


def _private(path: str) -> bool:
    st = os.lstat(path)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


_FINGERPRINT: list[bytes] = []


def _fingerprint() -> bytes:
    """The implementation's fingerprint (module docstring), computed once per process."""
    if not _FINGERPRINT:
        from dsl.grammar import grammar_path

        here = os.path.dirname(os.path.abspath(__file__))
        parts = [sys.version.encode(), _TAG]
        files = [str(grammar_path())]
        from importlib.util import find_spec  # Lark's version, without importing it: its package's files

        lark = find_spec("lark")
        if lark is not None and lark.origin:
            files.append(lark.origin)
            files.append(os.path.join(os.path.dirname(lark.origin), "lark.py"))
        for root, dirs, names in os.walk(here):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
        for path in files:
            try:
                st = os.stat(path)
            except OSError:  # a file of Lark's that this version does not have
                parts.append(f"{path}:missing".encode("utf-8", "surrogateescape"))
                continue
            parts.append(f"{os.path.relpath(path, here)}:{st.st_size}:{st.st_mtime_ns}".encode("utf-8", "surrogateescape"))
        _FINGERPRINT.append(hashlib.sha256(b"\n".join(parts)).digest())
    return _FINGERPRINT[0]


def _key(text: str) -> str:
    return hashlib.sha256(_fingerprint() + text.encode("utf-8", "surrogatepass")).hexdigest()


def get(text: str):
    """(tree, diagnostics) kept for this source text, or None."""
    folder = _folder()
    if folder is None:
        return None
    try:
        key = _key(text)
        path = os.path.join(folder, key + SUFFIX)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or st.st_size > MAX_ENTRY_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_ENTRY_BYTES + 1)
        stored_key, tree, diagnostics = _loads(data)
        if stored_key != key:
            return None
        from dsl import ast

        if type(tree) is not ast.PolicyFile or type(diagnostics) is not tuple:
            return None
        return tree, diagnostics
    except Exception:  # unreadable, truncated, or not a tree: parse the source instead
        return None
    finally:
        os.close(fd)


def put(text: str, tree, diagnostics) -> None:
    """Keep the checked tree of `text` (no error in `diagnostics`); never raises."""
    folder = _folder()
    if folder is None:
        return
    tmp = None
    try:
        import pickle

        key = _key(text)
        data = pickle.dumps((key, tree, tuple(diagnostics)), protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > MAX_ENTRY_BYTES:
            return
        tmp = os.path.join(folder, f".{key}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(fd, "wb", closefd=False) as file:
                file.write(data)
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(folder, key + SUFFIX))
        _prune(folder)
    except Exception:  # a full disk, a read-only folder, a race: the next load parses again
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _prune(folder: str) -> None:
    """Remove the oldest entries beyond MAX_ENTRIES, and temporary files left by a crash."""
    entries = []
    with os.scandir(folder) as it:
        for entry in it:
            if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                entries.append((entry.stat().st_mtime_ns, entry.path))
            elif entry.name.endswith(".tmp") and entry.stat().st_mtime_ns < _an_hour_ago():
                os.unlink(entry.path)
    entries.sort()
    for _, path in entries[:-MAX_ENTRIES]:
        os.unlink(path)


def _an_hour_ago() -> int:
    import time

    return time.time_ns() - 3600 * 10**9


def _loads(data: bytes):
    import pickle

    from dsl import ast, errors

    allowed = {"dsl.ast": ast, "dsl.errors": errors}

    class TreeUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str):
            space = allowed.get(module)
            value = getattr(space, name, None) if space is not None and not name.startswith("_") else None
            if isinstance(value, type) and value.__module__ == module:
                return value
            raise pickle.UnpicklingError(f"a policy tree holds no {module}.{name}")

    import io

    return TreeUnpickler(io.BytesIO(data)).load()
