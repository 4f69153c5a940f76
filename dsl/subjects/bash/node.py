"""The nodes of a parse tree of bash text (dsl.subjects.bash.parser).

A node has the subset of py-tree-sitter's `Node` interface that dsl.subjects.shell reads, with the
same meaning: `type` (a named node's kind, or an anonymous node's text such as `'|'`), `is_named`,
`start_byte` / `end_byte` (offsets into the UTF-8 text), `children` (a list, or an empty tuple for
a leaf), `parent`, `id` (stable for the life of the tree), the fields (`child_by_field_name`,
`children_by_field_name`, `field_name_for_child`), `child_count`, `named_children`, and `has_error` / `is_missing`, which are always False: the
parser raises instead of building an error node. There is no `text`: a reader slices its own
source.
"""

from __future__ import annotations


class Node:
    """One node; `fields` is None (no child has a field) or a list parallel to `children`."""

    __slots__ = ("type", "is_named", "start_byte", "end_byte", "children", "fields", "parent")

    has_error = False
    is_missing = False

    def __init__(self, kind: str, start: int, end: int, named: bool = True, children=(), fields: list | None = None):
        self.type = kind
        self.is_named = named
        self.start_byte = start
        self.end_byte = end
        self.children = children
        self.fields = fields
        self.parent = None

    @property
    def id(self) -> int:
        return id(self)

    @property
    def child_count(self) -> int:
        return len(self.children)

    @property
    def named_children(self) -> list:
        return [c for c in self.children if c.is_named]

    def child_by_field_name(self, name: str):
        if self.fields is not None:
            for child, field in zip(self.children, self.fields):
                if field == name:
                    return child
        return None

    def children_by_field_name(self, name: str) -> list:
        if self.fields is None:
            return []
        return [child for child, field in zip(self.children, self.fields) if field == name]

    def field_name_for_child(self, index: int) -> str | None:
        return None if self.fields is None else self.fields[index]

    def sexp(self, field: str | None = None) -> str:
        """`(field: type[start,end] children...)`, anonymous types quoted: the form the differential
        tests compare with tree-sitter's tree."""
        name = self.type if self.is_named else repr(self.type)
        head = f"{field + ': ' if field else ''}{name}[{self.start_byte},{self.end_byte}]"
        fields = self.fields or [None] * len(self.children)
        inner = " ".join(c.sexp(f) for c, f in zip(self.children, fields))
        return f"({head}{' ' + inner if inner else ''})"


def sexp_of_tree_sitter(node, field: str | None = None) -> str:
    """The same S-expression of a py-tree-sitter node (for the differential tests)."""
    name = node.type if node.is_named else repr(node.type)
    if node.is_missing:
        name = "MISSING " + name
    head = f"{field + ': ' if field else ''}{name}[{node.start_byte},{node.end_byte}]"
    inner = " ".join(sexp_of_tree_sitter(c, node.field_name_for_child(i)) for i, c in enumerate(node.children))
    return f"({head}{' ' + inner if inner else ''})"
