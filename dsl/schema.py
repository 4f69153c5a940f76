"""Tool argument schemas, read into the checker's load-time types.

`countersign policy check FILE --tools TOOLS.json` (and `Policy.load(path, tools=...)`) check a
policy against the tools it is written for: an unknown tool, an unknown argument path or a
comparison of the wrong type is then an error at load instead of a condition that silently never
holds (or always errors) at run time. This module reads the schemas; `dsl.checker` uses them.

Accepted files (`load_tools`), all JSON:

* a list of tools, each `{"name": ..., "parameters" | "input_schema" | "inputSchema": JSON Schema}`
  (tau-bench, Anthropic and MCP tool definitions; extra keys are ignored), also the OpenAI form
  `{"type": "function", "function": {"name", "parameters"}}`;
* ToolEmu's toolkits: a list of `{"toolkit", "name_for_model", "tools": [{"name", "parameters":
  [{"name", "type", "required"}, ...]}]}`. ToolEmu agents call a tool by its toolkit's
  `name_for_model` followed by the tool's name (`Terminal` + `Execute` = `TerminalExecute`), so
  that is the name used here. The one-tool-per-entry form with a `toolkit` key (as in the shared
  corpus's `toolemu_tools.json`) is read the same way: a name that does not already start with
  its toolkit is prefixed with it;
* an MCP `tools/list` answer, `{"tools": [{"name", "inputSchema"}, ...]}`, or the whole JSON-RPC
  response around it (`{"jsonrpc": "2.0", "id": ..., "result": {"tools": [...]}}`).

A tool listed twice with the same schema counts once; with different schemas, a call may fit
either, so the types are joined (a field either schema knows is known, a type the schemas
disagree on is `any`).

How JSON Schema maps to the checker's types (`dsl.checker`): `string` → string, `integer` and
`number` → number, `boolean` → bool, `null` → null, `array` → `list[T]` (T from `items`),
`object` → object with typed fields. A type list with `null` is the other type (null compares
with anything); other type lists, `anyOf`/`oneOf`/`allOf` whose branches disagree, and anything
not understood are `any`, which the checker accepts everywhere: a schema can only add errors
where it is definite. `enum` and `const` keep their values, so that `args.reason == "x"` with an
`x` the enum does not list is an error. Local `$ref`s (`#/$defs/...`, `#/definitions/...`) are
followed.

**Closed objects.** A tool's arguments are named parameters, so an object schema that lists
`properties` is read as closed: a field it does not list is an unknown argument, unless the schema
says otherwise with `additionalProperties: true` (or a schema for them) or `patternProperties`.
An object schema without `properties` accepts any field. JSON Schema's own default (an unlisted
property is allowed unless `additionalProperties` is false) is available with
`load_tools(..., closed=False)` (`--open-schemas` on the command line); then only schemas that say
`additionalProperties: false` make `args.pth` an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from dsl.values import selector_regex

STRING, NUMBER, BOOL, NULL, LIST, OBJECT, ANY = "string", "number", "bool", "null", "list", "object", "any"

_JSON_TYPES = {"string": STRING, "integer": NUMBER, "number": NUMBER, "boolean": BOOL, "null": NULL,
               "array": LIST, "object": OBJECT}
# ToolEmu's parameter lists use JSON Schema's type names, with a few spellings of their own.
_LOOSE_TYPES = {**_JSON_TYPES, "str": STRING, "int": NUMBER, "float": NUMBER, "bool": BOOL,
                "list": LIST, "dict": OBJECT}
_MAX_DEPTH = 64  # nesting (and $ref chains) deeper than this reads as `any`


class ToolSchemaError(ValueError):
    """A tools file that cannot be read as tool schemas: the message names the file and the entry."""


@dataclass(frozen=True, eq=False)
class ArgType:
    """The load-time type of an argument (or of the whole `args` object) as a schema gives it.

    - `kind`: a checker type (`string`, `number`, `bool`, `null`, `list`, `object`, `any`); lists
      carry their item type in `items` (`type_name` gives `list[string]`).
    - `fields`: an object's listed properties; `closed`: no other field may appear; `extra`: the
      type of other fields when the schema gives one (`additionalProperties: {...}`).
    - `enum`: the values the schema allows (JSON values), when it lists them.
    """

    kind: str
    fields: Mapping[str, "ArgType"] = field(default_factory=dict)
    closed: bool = False
    extra: "ArgType | None" = None
    items: "ArgType | None" = None
    enum: tuple | None = None

    @property
    def type_name(self) -> str:
        """The checker's name for this type: `list[string]` for a list of strings."""
        if self.kind == LIST and self.items is not None and self.items.kind != ANY:
            return f"list[{self.items.type_name}]"
        return self.kind

    def child(self, key: str | int) -> "ArgType | None":
        """The type of `value[key]`: a field of an object (None when the object is closed and does
        not list it) or an item of a list. Only for `object`, `list` and `any`."""
        if self.kind == ANY:
            return ANY_TYPE
        if self.kind == OBJECT:
            if key in self.fields:
                return self.fields[key]
            if self.closed:
                return None
            return self.extra or ANY_TYPE
        return self.items or ANY_TYPE  # a list, read by index

    def field_names(self) -> list[str]:
        return list(self.fields)

    def shape(self) -> tuple:
        """A hashable description, for comparing two schemas of the same tool."""
        return (
            self.kind,
            tuple((k, v.shape()) for k, v in sorted(self.fields.items())),
            self.closed,
            self.extra.shape() if self.extra else None,
            self.items.shape() if self.items else None,
            _enum_key(self.enum),
        )


ANY_TYPE = ArgType(ANY)


@dataclass(frozen=True)
class ToolSchema:
    """One tool: its name as agents call it, its argument type, and where it was read."""

    name: str
    args: ArgType
    where: str


class ToolSchemas:
    """The tools a policy is checked against, by name. `origin` names the file (for messages)."""

    def __init__(self, tools: Iterable[ToolSchema], origin: str = "the tool schemas"):
        self.origin = origin
        self.tools: dict[str, ToolSchema] = {}
        for tool in tools:
            known = self.tools.get(tool.name)
            if known is None:
                self.tools[tool.name] = tool
            elif known.args.shape() != tool.args.shape():
                self.tools[tool.name] = ToolSchema(tool.name, join(known.args, tool.args), f"{known.where} and {tool.where}")

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def names(self) -> list[str]:
        return list(self.tools)

    def args_of(self, name: str) -> ArgType:
        return self.tools[name].args

    def matching(self, pattern: str) -> list[str]:
        """The tools a selector covers (a name, or a glob with `*` and `?`), in file order."""
        if "*" in pattern or "?" in pattern:
            regex = selector_regex(pattern)
            return [n for n in self.tools if regex.match(n)]
        return [pattern] if pattern in self.tools else []

    @classmethod
    def load(cls, path: str | Path, *, closed: bool = True) -> "ToolSchemas":
        return load_tools(path, closed=closed)

    @classmethod
    def from_json(cls, data: Any, origin: str = "the tool schemas", *, closed: bool = True) -> "ToolSchemas":
        return cls(_read_tools(data, origin, closed), origin)


def load_tools(path: str | Path, *, closed: bool = True) -> ToolSchemas:
    """Read a tools file in any of the accepted forms (see the module's docstring).

    Raises OSError when it cannot be read and ToolSchemaError when it is not JSON or not tools."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolSchemaError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return ToolSchemas.from_json(data, str(path), closed=closed)


def combine(schemas: Iterable[ToolSchemas]) -> ToolSchemas:
    """Several tools files as one (a tool in two of them is joined as if listed twice in one)."""
    schemas = list(schemas)
    return ToolSchemas((t for s in schemas for t in s.tools.values()), " and ".join(s.origin for s in schemas))


def as_tool_schemas(tools: "ToolSchemas | str | Path | list | dict") -> ToolSchemas:
    """ToolSchemas from ToolSchemas, a path to a tools file, or the decoded JSON of one."""
    if isinstance(tools, ToolSchemas):
        return tools
    if isinstance(tools, (str, Path)):
        return load_tools(tools)
    return ToolSchemas.from_json(tools)


# --- reading the accepted forms ---------------------------------------------------------------


def _read_tools(data: Any, origin: str, closed: bool) -> list[ToolSchema]:
    if isinstance(data, dict) and "jsonrpc" in data:
        if "error" in data:
            raise ToolSchemaError(f"{origin}: the JSON-RPC response is an error: {json.dumps(data['error'])[:200]}")
        data = data.get("result")
    if isinstance(data, dict) and isinstance(data.get("tools"), list) and "name" not in data:
        data = data["tools"]  # an MCP tools/list result
    elif isinstance(data, dict) and "name" in data:
        data = [data]
    if not isinstance(data, list):
        raise ToolSchemaError(
            f"{origin}: expected a list of tools, ToolEmu toolkits, or an MCP tools/list answer ({{\"tools\": [...]}})"
        )
    out: list[ToolSchema] = []
    for i, entry in enumerate(data):
        where = f"{origin} entry {i}"
        if not isinstance(entry, dict):
            raise ToolSchemaError(f"{where}: a tool is a JSON object, not {type(entry).__name__}")
        if isinstance(entry.get("tools"), list):  # a ToolEmu toolkit
            prefix = entry.get("name_for_model") or entry.get("toolkit") or ""
            if not isinstance(prefix, str):
                raise ToolSchemaError(f"{where}: the toolkit's name_for_model is not a string")
            for j, tool in enumerate(entry["tools"]):
                here = f"{where} tool {j}"
                if not isinstance(tool, dict):
                    raise ToolSchemaError(f"{here}: a tool is a JSON object")
                name = _name(tool, here)
                out.append(ToolSchema(prefix + name, _arguments(tool.get("parameters"), here, closed), here))
            continue
        if entry.get("type") == "function" and isinstance(entry.get("function"), dict):
            entry = entry["function"]  # OpenAI's {"type": "function", "function": {...}}
        name = _name(entry, where)
        toolkit = entry.get("toolkit")
        if isinstance(toolkit, str) and toolkit and not name.startswith(toolkit):
            name = toolkit + name  # ToolEmu: agents call Terminal's Execute as TerminalExecute
        schema = next((entry[k] for k in ("parameters", "input_schema", "inputSchema") if k in entry), None)
        out.append(ToolSchema(name, _arguments(schema, where, closed), where))
    return out


def _name(entry: dict, where: str) -> str:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ToolSchemaError(f"{where}: a tool needs a name (a non-empty string)")
    return name


def _arguments(schema: Any, where: str, closed: bool) -> ArgType:
    """The type of a tool's whole `args` object."""
    if schema is None or schema is True:
        return ArgType(OBJECT)  # no schema given, or `true`: any arguments
    if schema is False:
        return ArgType(OBJECT, closed=True)  # `false`: no argument is valid
    if isinstance(schema, list):  # ToolEmu: [{"name", "type", "description", "required"}, ...]
        fields = {}
        for p in schema:
            if not isinstance(p, dict) or not isinstance(p.get("name"), str):
                raise ToolSchemaError(f"{where}: a parameter is an object with a name")
            kind = _LOOSE_TYPES.get(str(p.get("type", "")).strip().lower(), ANY)
            fields[p["name"]] = ArgType(kind)
        return ArgType(OBJECT, fields, closed=True)
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"{where}: the argument schema is a JSON object, not {type(schema).__name__}")
    args = _Reader(schema, closed).read(schema, 0)
    if args.kind != OBJECT:
        return ArgType(OBJECT)  # arguments are always an object; a schema saying otherwise says nothing usable
    return args


class _Reader:
    """JSON Schema → ArgType, following local $refs."""

    def __init__(self, root: dict, closed: bool):
        self.root = root
        self.closed = closed

    def read(self, schema: Any, depth: int) -> ArgType:
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return ANY_TYPE  # `true`, `{}`-like or too deep: anything
        if isinstance(schema.get("$ref"), str):
            target = self.ref(schema["$ref"])
            if target is None:
                return ANY_TYPE
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            base = self.read(target, depth + 1)
            return base if not _typed(rest) else meet_or_any(base, self.read(rest, depth + 1))
        own = self.own(schema, depth)
        branches = []
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                branches += [b for b in schema[key] if _typed(b)]
        if branches:
            union = self.read(branches[0], depth + 1)
            for b in branches[1:]:
                union = join(union, self.read(b, depth + 1))
            own = meet_or_any(own, union)
        if isinstance(schema.get("allOf"), list):
            # allOf is an intersection; reading it as "the fields any part lists are known" never
            # invents an error, which is what matters here
            for b in schema["allOf"]:
                if _typed(b):
                    own = meet_or_any(own, self.read(b, depth + 1))
        return own

    def ref(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None  # remote references are not fetched
        node: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def own(self, schema: dict, depth: int) -> ArgType:
        """The type a schema gives by its own keywords (type, enum, const, properties, items)."""
        enum = None
        if "const" in schema:
            enum = (schema["const"],)
        elif isinstance(schema.get("enum"), list):
            enum = tuple(schema["enum"])
        kinds = schema.get("type")
        if isinstance(kinds, str):
            kinds = [kinds]
        if isinstance(kinds, list):
            mapped = {_JSON_TYPES.get(k, ANY) for k in kinds if isinstance(k, str)}
        elif enum is not None:
            mapped = {_value_kind(v) for v in enum}
        elif "properties" in schema or "additionalProperties" in schema:
            mapped = {OBJECT}
        elif "items" in schema or "prefixItems" in schema:
            mapped = {LIST}
        else:
            mapped = {ANY}
        if len(mapped) > 1:
            mapped.discard(NULL)  # null compares with anything: "string or null" reads as string
        kind = mapped.pop() if len(mapped) == 1 else ANY
        if enum is not None and kind != ANY:
            enum = tuple(v for v in enum if _value_kind(v) in (kind, NULL)) or enum
        if kind == OBJECT:
            props = schema.get("properties")
            fields = {}
            if isinstance(props, dict):
                fields = {str(k): self.read(v, depth + 1) for k, v in props.items()}
            extra_schema = schema.get("additionalProperties")
            extra = None
            if schema.get("patternProperties"):
                is_closed = False
            elif extra_schema is False:
                is_closed = True
            elif extra_schema is None:
                is_closed = self.closed and isinstance(props, dict)
            else:
                is_closed = False
                if isinstance(extra_schema, dict) and _typed(extra_schema):
                    extra = self.read(extra_schema, depth + 1)
            return ArgType(OBJECT, fields, closed=is_closed, extra=extra, enum=enum)
        if kind == LIST:
            items = schema.get("items")
            item_type = self.read(items, depth + 1) if isinstance(items, dict) else None
            return ArgType(LIST, items=item_type, enum=enum)
        return ArgType(kind, enum=enum)


_TYPING_KEYS = ("type", "enum", "const", "properties", "additionalProperties", "items", "prefixItems",
                "$ref", "anyOf", "oneOf", "allOf")


def _typed(schema: Any) -> bool:
    """Does this (sub)schema say anything about the type? `{"required": [...]}` does not."""
    return isinstance(schema, dict) and any(k in schema for k in _TYPING_KEYS)


def _value_kind(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, (int, float)):
        return NUMBER
    if isinstance(value, str):
        return STRING
    if isinstance(value, list):
        return LIST
    return OBJECT


def _enum_key(enum: tuple | None) -> tuple | None:
    if enum is None:
        return None
    return tuple(json.dumps(v, sort_keys=True) for v in enum)


def enum_allows(enum: tuple, value: Any) -> bool:
    """Is a literal `value` one of `enum`'s values, compared as the policy language compares
    (numbers by value, a boolean is not a number)?"""
    kind = _value_kind(value)
    return any(_value_kind(v) == kind and v == value for v in enum)


def join(a: ArgType, b: ArgType) -> ArgType:
    """A type that admits whatever `a` or `b` admits (for a tool listed twice, and anyOf)."""
    if a is b or a.shape() == b.shape():
        return a
    if a.kind == NULL and a.enum is None:
        return b
    if b.kind == NULL and b.enum is None:
        return a
    if a.kind != b.kind or ANY in (a.kind, b.kind):
        return ANY_TYPE
    enum = None if a.enum is None or b.enum is None else _unique(a.enum + b.enum)
    if a.kind == OBJECT:
        fields = dict(a.fields)
        for k, v in b.fields.items():
            fields[k] = join(fields[k], v) if k in fields else v
        closed = a.closed and b.closed
        open_any = (not a.closed and a.extra is None) or (not b.closed and b.extra is None)
        extras = [x.extra for x in (a, b) if x.extra is not None]
        extra = None if closed or open_any or not extras else extras[0] if len(extras) == 1 else join(*extras)
        # a field one schema lists and the other does not admit (closed, no extra) is still known
        return ArgType(OBJECT, fields, closed=closed, extra=extra, enum=enum)
    if a.kind == LIST:
        items = None if a.items is None or b.items is None else join(a.items, b.items)
        return ArgType(LIST, items=items, enum=enum)
    return ArgType(a.kind, enum=enum)


def meet_or_any(a: ArgType, b: ArgType) -> ArgType:
    """Both `a` and `b` constrain one value (a $ref with siblings, type with anyOf). Keep the more
    precise one when they agree on the kind; otherwise give up to `any`, never to an error."""
    if a.kind == ANY:
        return b
    if b.kind == ANY:
        return a
    if a.kind != b.kind:
        return ANY_TYPE
    if a.kind == OBJECT:
        return join(a, b)  # the fields either lists are known
    return a if a.enum is not None or b.enum is None else b


def _unique(values: tuple) -> tuple:
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault(json.dumps(v, sort_keys=True), v)
    return tuple(seen.values())
