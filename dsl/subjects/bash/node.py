"""The nodes of a parse tree of bash text (dsl.subjects.bash.parser).

A node has the subset of py-tree-sitter's `Node` interface that dsl.subjects.shell reads, with the
same meaning: `type` (a named node's kind, or an anonymous node's text such as `'|'`), `is_named`,
`start_byte` / `end_byte` (offsets into the UTF-8 text), `children`, `parent`, `id` (stable for the
life of the tree), the fields (`child_by_field_name`, `children_by_field_name`), `text`,
`child_count`, `named_children`, `descendant_for_byte_range`, and `has_error` / `is_missing`, which
are always False: the parser raises instead of building an error node.
"""

from __future__ import annotations


class Node:
    __slots__ = ("type", "is_named", "start_byte", "end_byte", "children", "fields", "parent", "_source")

    has_error = False
    is_missing = False

    def __init__(self, kind: str, start: int, end: int, named: bool = True, children: list | None = None,
                 fields: list | None = None):
        self.type = kind
        self.is_named = named
        self.start_byte = start
        self.end_byte = end
        self.children = children if children is not None else []
        self.fields = fields if fields is not None else [None] * len(self.children)
        self.parent = None
        self._source = None

    @property
    def id(self) -> int:
        return id(self)

    @property
    def text(self) -> bytes | None:
        return None if self._source is None else self._source[self.start_byte : self.end_byte]

    @property
    def child_count(self) -> int:
        return len(self.children)

    @property
    def named_children(self) -> list:
        return [c for c in self.children if c.is_named]

    def child_by_field_name(self, name: str):
        for child, field in zip(self.children, self.fields):
            if field == name:
                return child
        return None

    def children_by_field_name(self, name: str) -> list:
        return [child for child, field in zip(self.children, self.fields) if field == name]

    def field_name_for_child(self, index: int) -> str | None:
        return self.fields[index]

    def descendant_for_byte_range(self, start: int, end: int):
        """The smallest node that holds bytes [start, end) (tree-sitter's rule: descend into the
        first child that spans the range)."""
        node = self
        while True:
            for child in node.children:
                if child.start_byte <= start and end <= child.end_byte and child.end_byte > child.start_byte:
                    node = child
                    break
            else:
                return node

    def sexp(self, field: str | None = None) -> str:
        """`(field: type[start,end] children...)`, anonymous types quoted: the form the differential
        tests compare with tree-sitter's tree."""
        name = self.type if self.is_named else repr(self.type)
        head = f"{field + ': ' if field else ''}{name}[{self.start_byte},{self.end_byte}]"
        inner = " ".join(c.sexp(f) for c, f in zip(self.children, self.fields))
        return f"({head}{' ' + inner if inner else ''})"


def sexp_of_tree_sitter(node, field: str | None = None) -> str:
    """The same S-expression of a py-tree-sitter node (for the differential tests)."""
    name = node.type if node.is_named else repr(node.type)
    if node.is_missing:
        name = "MISSING " + name
    head = f"{field + ': ' if field else ''}{name}[{node.start_byte},{node.end_byte}]"
    inner = " ".join(sexp_of_tree_sitter(c, node.field_name_for_child(i)) for i, c in enumerate(node.children))
    return f"({head}{' ' + inner if inner else ''})"
