"""YAML frontmatter: parse, render and update without ever losing the user's YAML or body.

Contract (ARCHITECTURE §4 "Frontmatter"):

* A block exists only when the very first line (after an optional UTF-8 BOM) is ``---`` and a later line is
  ``---`` or ``...`` (trailing blanks and CRLF tolerated). An opening ``---`` that never closes is a thematic
  break, not frontmatter, so it can never swallow the body (python-frontmatter and markdown-it's front_matter
  plugin both get this wrong, see ARCHITECTURE §10.7); it gives a ``warning`` (``frontmatter not closed…``) with
  ``has_block`` False, as it is usually a block missing its end.
* A block that closes but holds invalid YAML or a non-mapping gives ``meta == {}`` plus a ``warning``; the body
  still starts after the block, so line numbers stay true file lines. This matches Obsidian, which also treats
  such a block as (broken) properties rather than as body text. ``raw`` keeps the text for callers that want it.
  A YAML error names true file lines and 1-based columns (``invalid YAML at line 4, column 7: …``; the
  opening ``---`` is line 1, a BOM does not count).
* YAML is read with PyYAML's safe machinery but with YAML 1.2 core-schema scalars, the schema Obsidian's
  js-yaml uses: only ``true``/``false`` are booleans (``NO``, ``on``, ``yes`` stay strings), ``12:30`` is not a
  sexagesimal number, ``0755`` is decimal. Timestamps (``2026-06-20``) become ISO-8601 strings. Unknown tags
  (``!foo``, ``!!python/object``) give plain values, duplicate keys keep the last value, and a scalar that
  cannot be built for its type (``2024-02-30``, ``!!int abc``) stays a string: one odd key never drops the
  others.
* Writes (:func:`update_frontmatter`) edit only the top-level keys they touch, so comments, quoting and the
  layout of every other key survive byte for byte; body bytes, the BOM and the newline style are untouched.
  An invalid or non-mapping block is refused with :class:`FrontmatterError` instead of being overwritten.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = [
    "Frontmatter",
    "FrontmatterError",
    "frontmatter_text_values",
    "parse_frontmatter",
    "render_frontmatter",
    "update_frontmatter",
]

_BOM = "\ufeff"
# Containers and leaves visited while normalising one block; an alias bomb ("billion laughs") exceeds this.
_MAX_NODES = 200_000


class FrontmatterError(ValueError):
    """Raised by :func:`update_frontmatter` when the existing block is invalid YAML or not a mapping."""


@dataclass
class Frontmatter:
    """Result of :func:`parse_frontmatter`.

    ``meta``: the mapping (keys ``str``, dates as ISO strings, JSON-compatible values), ``{}`` when absent or
    invalid. ``raw``: YAML text between the fences (original newlines), ``None`` without a block.
    ``body_start_line``: 1-based file line where the body starts (1 without a block). ``body_offset``: character
    offset of the body in the BOM-stripped text. ``warning``: why ``meta`` is empty although a block exists
    (invalid YAML, with its file line; not a mapping), or that a leading ``---`` never closes (then
    ``has_block`` is False). ``has_block``: a closed fenced block was found, valid or not.
    """

    meta: dict
    raw: str | None
    body_start_line: int
    body_offset: int
    warning: str | None
    has_block: bool


# --------------------------------------------------------------------------------------------------------
# Loader: PyYAML safe constructors with YAML 1.2 core-schema resolvers and forgiving constructors
# --------------------------------------------------------------------------------------------------------

_T_BOOL = "tag:yaml.org,2002:bool"
_T_INT = "tag:yaml.org,2002:int"
_T_FLOAT = "tag:yaml.org,2002:float"
_T_TS = "tag:yaml.org,2002:timestamp"
_T_VALUE = "tag:yaml.org,2002:value"

_RE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_RE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_RE_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_BOOL_WORDS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def _core_resolvers(base: dict) -> dict:
    """Copy of PyYAML's implicit resolver table without its YAML 1.1 bool/int/float (and ``=``) entries."""
    drop = {_T_BOOL, _T_INT, _T_FLOAT, _T_VALUE}
    return {ch: [(tag, rx) for tag, rx in lst if tag not in drop] for ch, lst in base.items()}


class _LoaderMixin:
    """Safe loading, YAML 1.2 core scalars, never failing on one odd value (see module docstring)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict:
        # Own version: keys become strings here, so unhashable keys (``? [a, b]``) cannot abort the load.
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        self.flatten_mapping(node)  # type: ignore[attr-defined]
        mapping: dict = {}
        for key_node, value_node in node.value:
            key = _key_str(self.construct_object(key_node, deep=True))  # type: ignore[attr-defined]
            mapping[key] = self.construct_object(value_node, deep=deep)  # type: ignore[attr-defined]
        return mapping


class _Loader(_LoaderMixin, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Fast (libyaml) loader used for parsing."""


class _PyLoader(_LoaderMixin, yaml.SafeLoader):
    """Pure-Python twin used to compose nodes with exact line marks for in-place updates."""


def _by_kind(loader: Any, node: Any) -> Any:
    """Plain value for a node whatever its tag: str, list or dict."""
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)


def _scalar_or_kind(fn):
    """Wrap a scalar constructor: on a non-scalar node or a value it cannot build, fall back to plain data."""

    def construct(loader: Any, node: Any) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return _by_kind(loader, node)
        try:
            return fn(loader, node)
        except (ValueError, TypeError, OverflowError, yaml.YAMLError):
            return loader.construct_scalar(node)

    return construct


def _c_bool(loader: Any, node: Any) -> Any:
    value = loader.construct_scalar(node)
    return _BOOL_WORDS[value.lower()] if value.lower() in _BOOL_WORDS else value


def _c_int(loader: Any, node: Any) -> int:
    value = loader.construct_scalar(node).strip().replace("_", "")
    sign = -1 if value.startswith("-") else 1
    digits = value.lstrip("+-").lower()
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits.startswith("0o"):
        return sign * int(digits[2:], 8)
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    return sign * int(digits, 10)


def _c_float(loader: Any, node: Any) -> float:
    value = loader.construct_scalar(node).strip().replace("_", "").lower()
    if value.lstrip("+-") == ".inf":
        return -math.inf if value.startswith("-") else math.inf
    if value == ".nan":
        return math.nan
    return float(value)


def _c_timestamp(loader: Any, node: Any) -> str:
    # ISO text, not date objects: JSON-safe, and what the index's date filters compare.
    return yaml.SafeLoader.construct_yaml_timestamp(loader, node).isoformat()


for _cls in (_Loader, _PyLoader):
    _cls.yaml_implicit_resolvers = _core_resolvers(yaml.SafeLoader.yaml_implicit_resolvers)
    _cls.add_implicit_resolver(_T_BOOL, _RE_BOOL, list("tTfF"))
    _cls.add_implicit_resolver(_T_INT, _RE_INT, list("-+0123456789"))
    _cls.add_implicit_resolver(_T_FLOAT, _RE_FLOAT, list("-+0123456789."))
    for _tag, _fn in ((_T_BOOL, _c_bool), (_T_INT, _c_int), (_T_FLOAT, _c_float), (_T_TS, _c_timestamp),
                      ("tag:yaml.org,2002:str", yaml.SafeLoader.construct_yaml_str)):
        _cls.add_constructor(_tag, _scalar_or_kind(_fn))
    # Base64 blobs stay text; ordered maps / pairs become plain lists; unknown tags become plain values.
    for _tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs", None):
        _cls.add_constructor(_tag, _by_kind)


def _key_str(key: Any) -> str:
    """A mapping key as text, spelled the way YAML/JSON would write the scalar."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, (_dt.date, _dt.datetime)):
        return key.isoformat()
    if isinstance(key, (list, tuple, dict, set, frozenset)):
        return str(_normalise(key, [0], set()))
    return str(key)


class _TooBig(Exception):
    pass


def _normalise(value: Any, budget: list[int], active: set[int]) -> Any:
    """JSON-friendly copy: dict keys str, sets/tuples → lists, dates → ISO, cycles → None, bounded size."""
    budget[0] += 1
    if budget[0] > _MAX_NODES:
        raise _TooBig
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if id(value) in active:  # recursive alias (&a [*a])
            return None
        active.add(id(value))
        try:
            if isinstance(value, dict):
                return {_key_str(k): _normalise(v, budget, active) for k, v in value.items()}
            items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
            return [_normalise(v, budget, active) for v in items]
        finally:
            active.discard(id(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _yaml_message(exc: yaml.YAMLError, first_line: int) -> str:
    """One line naming the problem and where it is as a true file line (``first_line``: file line of the
    block's first YAML line) and 1-based column; PyYAML's own text counts lines inside the block."""
    if isinstance(exc, yaml.MarkedYAMLError):
        parts = [" ".join(str(p).split()) for p in (exc.context, exc.problem) if p]
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {first_line + mark.line}, column {mark.column + 1}" if mark is not None else ""
        ctx = exc.context_mark
        if exc.context and ctx is not None and exc.problem_mark is not None and ctx.line != exc.problem_mark.line:
            parts[0] += f" (line {first_line + ctx.line})"
        return f"invalid YAML{where}: " + ("; ".join(parts) or type(exc).__name__)
    return "invalid YAML: " + " ".join(str(exc).split())


# -- simple frontmatter without the YAML parser (issue 12: YAML was ~10 % of a cold pass) ------------------------
#: ``key: value`` at column 0; the key plain (no indicator, no ``:``/``#``), the value plain or empty.
_SIMPLE_KEY_RE = re.compile(r"([^\s\-?:,\[\]{}#&*!|>'\"%@`][^:#]*?):(?: +(.*))?")
#: ``- item`` of a block list (any indent, the same for all items of a key).
_SIMPLE_ITEM_RE = re.compile(r"( *)- +(.*)")
#: Characters a plain scalar may not start with (YAML indicators).
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_SCALAR_LOADER: Any = None


def _plain_ok(value: str) -> bool:
    """True when ``value`` (stripped of spaces) is one plain YAML scalar as written: no indicator first, no
    ``": "``/``" #"`` inside, no trailing ``:``, printable (tabs, NBSP, BOM and the like go the YAML way)."""
    return (bool(value) and value[0] not in _INDICATORS and ": " not in value and " #" not in value
            and not value.endswith(":") and value.isprintable())


#: ``{plain scalar: (ok, value)}`` of :func:`_simple_scalar` (tags, dates and flags recur across notes); values are
#: immutable (str, int, float, bool, None). Cleared when full.
_SCALARS: dict[str, tuple[bool, Any]] = {}


def _simple_scalar(value: str) -> tuple[bool, Any]:
    """``(True, value as _Loader builds it)`` for a plain scalar, through the loader's own implicit resolvers
    and constructors; ``(False, None)`` when that needs the parser (a merge key, an unknown tag)."""
    got = _SCALARS.get(value)
    if got is None:
        if len(_SCALARS) >= 20_000:
            _SCALARS.clear()
        got = _build_scalar(value)
        if len(value) <= 200:  # long values (descriptions) rarely recur
            _SCALARS[value] = got
    return got


def _build_scalar(value: str) -> tuple[bool, Any]:
    global _SCALAR_LOADER
    tag = "tag:yaml.org,2002:str"
    table = _Loader.yaml_implicit_resolvers
    for t, rx in table.get(value[0], []) + table.get(None, []):
        if rx.match(value):
            tag = t
            break
    if tag == "tag:yaml.org,2002:str":
        return True, value
    ctor = _Loader.yaml_constructors.get(tag)
    if ctor is None or tag == "tag:yaml.org,2002:merge":
        return False, None
    if _SCALAR_LOADER is None:
        _SCALAR_LOADER = _PyLoader("")
    return True, ctor(_SCALAR_LOADER, yaml.ScalarNode(tag, value))


def _load_simple(raw: str) -> tuple[bool, Any]:
    """``(True, data)`` when ``raw`` is only ``key: plain value`` lines, ``key:`` lines followed by ``- plain
    item`` lines and blank lines, with ``data`` exactly what :func:`_load_yaml` gives for it (the same resolvers
    and constructors build each scalar); ``(False, None)`` otherwise: anything else takes the YAML parser."""
    if "\t" in raw or "\r" in raw or "#" in raw and (raw.startswith("#") or "\n#" in raw or " #" in raw):
        return False, None
    out: dict = {}
    key: str | None = None  # the key whose list items may follow
    items: list | None = None
    indent = -1
    for line in raw.split("\n"):
        line = line.rstrip(" ")
        if not line:
            continue
        if key is not None and line[0] in " -":
            m = _SIMPLE_ITEM_RE.fullmatch(line)
            if m is None or not _plain_ok(m.group(2)) or (indent >= 0 and len(m.group(1)) != indent):
                return False, None
            indent = len(m.group(1))
            ok, v = _simple_scalar(m.group(2))
            if not ok:
                return False, None
            if items is None:
                items = out[key] = []
            items.append(v)
            continue
        key = items = None
        indent = -1
        m = _SIMPLE_KEY_RE.fullmatch(line)
        if m is None:
            return False, None
        k, v = m.group(1).rstrip(" "), m.group(2)
        if not k.isprintable() or len(k) > 512:  # libyaml refuses simple keys over 1024 characters
            return False, None
        ok, kv = _simple_scalar(k)
        if not ok or kv.__class__ is not str:
            return False, None
        if v is None or not v:
            out[k] = None  # becomes the list when items follow
            key = k
            continue
        if not _plain_ok(v):
            return False, None
        ok, val = _simple_scalar(v)
        if not ok:
            return False, None
        out[k] = val
    return True, (out or None)


def _load_yaml(raw: str, first_line: int = 1) -> tuple[Any, str | None]:
    """(data, error message). ``data`` is normalised; ``error`` says why loading failed, with file lines
    counted from ``first_line`` (the file line of ``raw``'s first line). Simple frontmatter (:func:`_load_simple`)
    is read without the YAML parser, with the same result."""
    ok, data = _load_simple(raw)
    if ok:
        return data, None
    try:
        data = yaml.load(raw, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader subclass
    except yaml.YAMLError as exc:
        return None, _yaml_message(exc, first_line)[:300]
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        return None, f"invalid YAML: {type(exc).__name__}: {exc}"[:300]
    try:
        return _normalise(data, [0], set()), None
    except _TooBig:
        return None, "invalid YAML: too many nodes (alias expansion?)"
    except RecursionError:
        return None, "invalid YAML: nested too deeply"


def _type_name(data: Any) -> str:
    return {list: "list", str: "str", int: "int", float: "float", bool: "bool"}.get(type(data), type(data).__name__)


# --------------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------------


def _is_fence(line: str, closing: bool) -> bool:
    s = line.rstrip(" \t\r\n")
    return s == "---" or (closing and s == "...")


def _find_block(text: str) -> tuple[int, int, int, int] | None:
    """(raw_start, raw_end, body_offset, lines_in_block) of a closed fenced block at the start of ``text``."""
    nl = text.find("\n")
    if nl < 0 or not _is_fence(text[:nl], closing=False):
        return None
    pos = nl + 1
    lines = 1
    while pos < len(text):
        end = text.find("\n", pos)
        line_end = len(text) if end < 0 else end
        lines += 1
        if _is_fence(text[pos:line_end], closing=True):
            return nl + 1, pos, (len(text) if end < 0 else end + 1), lines
        if end < 0:
            break
        pos = end + 1
    return None  # never closed: a thematic break, not frontmatter


def parse_frontmatter(text: str) -> Frontmatter:
    """Split ``text`` into frontmatter and body (see the module docstring for the rules).

    Never raises for any input. Offsets refer to ``text`` with a leading BOM removed.
    """
    if text.startswith(_BOM):
        text = text[1:]
    block = _find_block(text)
    if block is None:
        nl = text.find("\n")
        if nl >= 0 and _is_fence(text[:nl], closing=False):
            # Read as a thematic break (body text), but say so: it usually is frontmatter missing its end.
            return Frontmatter({}, None, 1, 0, "frontmatter not closed: the --- on line 1 has no closing --- "
                               "line, so the note has no properties (read as body text)", False)
        return Frontmatter({}, None, 1, 0, None, False)
    raw_start, raw_end, body_offset, n_lines = block
    raw = text[raw_start:raw_end]
    data, error = _load_yaml(raw, first_line=2)
    if error:
        return Frontmatter({}, raw, n_lines + 1, body_offset, error, True)
    if data is None:  # empty block or only comments: fine, just no keys
        return Frontmatter({}, raw, n_lines + 1, body_offset, None, True)
    if not isinstance(data, dict):
        return Frontmatter({}, raw, n_lines + 1, body_offset,
                           f"frontmatter is not a mapping ({_type_name(data)})", True)
    return Frontmatter(data, raw, n_lines + 1, body_offset, None, True)


def frontmatter_text_values(meta: dict) -> list[str]:
    """Every string leaf of ``meta`` (dict values and list items, recursively, in order) for keyword search."""
    out: list[str] = []
    stack: list[Any] = [meta]
    while stack:  # iterative: deep user YAML must not hit the recursion limit
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
    return out


# --------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Safe dumper that quotes any string a YAML 1.1 *or* 1.2 reader would type, so every reader (PyYAML,
    Obsidian's js-yaml, ours) reads back the same string."""


_Dumper.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeDumper.yaml_implicit_resolvers.items()}
_Dumper.add_implicit_resolver(_T_BOOL, _RE_BOOL, list("tTfF"))
_Dumper.add_implicit_resolver(_T_INT, _RE_INT, list("-+0123456789"))
_Dumper.add_implicit_resolver(_T_FLOAT, _RE_FLOAT, list("-+0123456789."))

_FOLDED = frozenset("\x85\u2028\u2029\ufeff")
_RE_ISO = re.compile(r"^\d{4}-\d\d-\d\d(?:[Tt ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d)?)?$")


def _represent_str(dumper: Any, value: str) -> Any:
    if any(ch in _FOLDED for ch in value):
        # PyYAML's emitter writes these raw into plain/single-quoted scalars, where readers fold them into
        # spaces; double quotes escape them, so the string reads back unchanged.
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    # ISO dates that read back unchanged are written plain (2026-06-20, as Obsidian writes them), not quoted.
    if _RE_ISO.match(value):
        try:
            if yaml.load(value, Loader=_Loader) == value:  # noqa: S506
                return dumper.represent_scalar(_T_TS, value)
        except yaml.YAMLError:
            pass
    return yaml.SafeDumper.represent_str(dumper, value)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(tuple, yaml.SafeDumper.represent_list)
_Dumper.add_representer(set, lambda d, v: d.represent_list(sorted(v, key=str)))
_Dumper.add_representer(frozenset, lambda d, v: d.represent_list(sorted(v, key=str)))


def _dump(meta: dict) -> str:
    return yaml.dump(meta, Dumper=_Dumper, allow_unicode=True, sort_keys=False, default_flow_style=False,
                     width=4096)


def render_frontmatter(meta: dict) -> str:
    """``"---\\n<yaml>---\\n"`` for ``meta`` (key order kept, unicode kept, no sorting); ``""`` when empty."""
    if not meta:
        return ""
    return "---\n" + _dump(_normalise(meta, [0], set())) + "---\n"


# --------------------------------------------------------------------------------------------------------
# Updating
# --------------------------------------------------------------------------------------------------------


def _newline_of(text: str) -> str:
    nl = text.find("\n")
    return "\r\n" if nl > 0 and text[nl - 1] == "\r" else "\n"


def _key_spans(raw: str) -> list[tuple[str, int, int]] | None:
    """(key, start, end) character spans of each top-level ``key: value`` entry in ``raw``, or ``None`` when
    the block's layout is not a plain block mapping we can edit line by line (flow style, complex keys)."""
    if any(ch in raw for ch in ("\r", "\x85", "\u2028", "\u2029")):
        return None  # PyYAML counts these as line breaks; our line offsets would drift
    try:
        root = yaml.compose(raw, Loader=_PyLoader)
    except yaml.YAMLError:
        return None
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return None
    starts = [0]
    for i, ch in enumerate(raw):
        if ch == "\n":
            starts.append(i + 1)

    def line_start(n: int) -> int:
        return starts[n] if n < len(starts) else len(raw)

    builder = _PyLoader("")
    spans: list[tuple[str, int, int]] = []
    for key_node, value_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.start_mark.column != 0:
            return None
        if key_node.tag == "tag:yaml.org,2002:merge":
            return None
        end = value_node.end_mark
        end_off = line_start(end.line) if end.column == 0 else line_start(end.line + 1)
        spans.append((_key_str(builder.construct_object(key_node, deep=True)),
                      line_start(key_node.start_mark.line), end_off))
    for (_, _, e), (_, s, _) in zip(spans, spans[1:]):
        if e > s:
            return None
    return spans


def _merged(old: dict, updates: dict, delete: set[str]) -> dict:
    meta = dict(old)
    for k, v in updates.items():
        meta[k] = v
    for k in delete:
        meta.pop(k, None)
    return meta


def _surgical(raw: str, spans: list[tuple[str, int, int]], updates: dict, delete: set[str]) -> str:
    """Edit ``raw`` in place: replace/delete only the touched top-level entries, append new keys."""
    pieces: list[tuple[int, int, str]] = []  # (start, end, replacement)
    done: set[str] = set()
    for key, start, end in spans:
        if key in delete or key in done:
            pieces.append((start, end, ""))  # deleted, or a later duplicate of an updated key
        elif key in updates:
            pieces.append((start, end, _dump({key: updates[key]})))
            done.add(key)
    out = raw
    for start, end, rep in sorted(pieces, reverse=True):
        out = out[:start] + rep + out[end:]
    new = {k: v for k, v in updates.items() if k not in done and k not in delete}
    if new:
        if out and not out.endswith("\n"):
            out += "\n"
        out += _dump(new)
    return out


def update_frontmatter(text: str, updates: dict | None = None, delete: Iterable[str] = ()) -> str:
    """Return ``text`` with ``updates`` merged into and ``delete`` keys removed from its frontmatter.

    Existing keys keep their position, new keys are appended, untouched entries (with their comments and
    quoting) stay byte-identical, the body is not modified, and the BOM and CRLF/LF style are kept. Without a
    block one is created (nothing is written when there is nothing to change). Raises :class:`FrontmatterError`
    when the existing block is invalid YAML or not a mapping, rather than overwrite it.
    """
    updates = {_key_str(k): v for k, v in (updates or {}).items()}
    delete_set = {_key_str(k) for k in delete}
    bom = _BOM if text.startswith(_BOM) else ""
    body_text = text[len(bom):]
    nl = _newline_of(body_text)
    fm = parse_frontmatter(body_text)
    norm_updates = _normalise(updates, [0], set())
    if fm.warning and fm.has_block:
        raise FrontmatterError(fm.warning)
    if not fm.has_block:
        if not norm_updates:
            return text
        block = render_frontmatter(norm_updates)
        return bom + block.replace("\n", nl) + body_text
    assert fm.raw is not None
    expected = _merged(fm.meta, norm_updates, delete_set)
    touched = set(norm_updates) | (delete_set & set(fm.meta))
    if not touched:
        return text
    raw_lf = fm.raw.replace("\r\n", "\n") if nl == "\r\n" else fm.raw
    new_raw: str | None = None
    spans = _key_spans(raw_lf)
    if spans is not None:
        candidate = _surgical(raw_lf, spans, norm_updates, delete_set)
        data, error = _load_yaml(candidate)
        if error is None and (data or {}) == expected and list((data or {})) == list(expected):
            new_raw = candidate
    if new_raw is None:  # layout we cannot edit in place (flow style, merges...): re-dump the merged mapping
        new_raw = _dump(expected) if expected else ""
    # Re-assemble: the original opening fence line, the new YAML, the original closing fence line, the body.
    open_end = body_text.find("\n") + 1
    raw_start = open_end
    raw_end = raw_start + len(fm.raw)
    if nl == "\r\n":
        new_raw = new_raw.replace("\n", "\r\n")
    if not new_raw.strip() and not expected:
        return bom + body_text[fm.body_offset:]  # last key deleted: drop the empty block (as Obsidian does)
    return bom + body_text[:raw_start] + new_raw + body_text[raw_end:]
