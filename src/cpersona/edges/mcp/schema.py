"""A tool's input schema as an agent reads it: the request model's JSON schema, compacted.

The request model's schema is written for the OpenAPI document and for property-based tests, which want
every rule spelled out; an agent's client puts every tool's schema in the model's context before the
agent does anything, so there each token counts. :func:`compact` keeps what a caller needs to write a
valid call (the properties, their types, bounds, enums, which are required, short descriptions) and
drops or folds the rest. The model still validates every call, and its errors name the field:

- ``title`` (the property's name again), defaults that mean "not given" (null, empty, false), the
  root's description (the tool's says what the call is for), a model docstring's later sentences;
- the regular expressions no caller reads: the text rules (no control characters, not blank), a time's
  (it says ``format: date-time``), any pattern longer than a few words (a description gives the form);
- an object's cross-field rules (``not``, branches without a type: one of two aliases given, say) and
  ``additionalProperties`` (an unknown field is refused by name);
- bounds no caller meets but by mistake (an id's length, the largest exact integer, year 9999);
- ``X | null`` as ``X``, unless a null means something of its own;
- the fields every tool shares (:data:`SCOPE_FIELDS`) lose their descriptions, which the server's
  instructions give once; a field the request accepts and ignores is not listed; Cerememory's nested
  structures are listed as objects with one line;
- a definition used once is put back where it is used, and a subschema that occurs more than once in
  a schema is declared once in ``$defs`` and referenced.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any, Final

from cpersona.model.epoch_time import EPOCH_TIME_SCHEMA, TIME_TEXT_PATTERN
from cpersona.model.fields import MAX_COUNT
from cpersona.model.memory_parts import EmotionBody, MemoryContent, MetaBody
from cpersona.model.text_rules import CLEAN_TEXT_PATTERN, NO_CONTROL_PATTERN, NOT_BLANK_ID_PATTERN
from cpersona.model.time_cue import MAX_TS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["SCOPE_FIELDS", "compact"]

Schema = dict[str, Any]

SCOPE_FIELDS: Final = frozenset({"agent_id", "project_id", "channel", "source_id"})
"""The scope every tool shares, described once in the server's instructions."""

# The text rules' patterns, from which a caller learns nothing it would write otherwise.
_TEXT_PATTERNS: Final = frozenset({CLEAN_TEXT_PATTERN, NO_CONTROL_PATTERN, NOT_BLANK_ID_PATTERN})
# A pattern longer than this is no rule a caller reads (its description says the form: mem:<uuid>).
_LONG_PATTERN: Final = 40
# Objects listed with their description only, which names their fields: Cerememory's structures (a
# record's 'why' plane, content as blocks) and the ten numbers of an emotion.
_SUMMARISED: Final = frozenset(model.__name__ for model in (MetaBody, MemoryContent, EmotionBody))
# Fields a request accepts and ignores (Cerememory's protocol header).
_IGNORED: Final = frozenset({"header"})
_UNSET: Final[tuple[object, ...]] = (None, [], {}, "", False)

# Keywords whose value is one subschema, a list of them, or a map of names to them.
_ONE: Final = ("items", "not", "contains", "additionalProperties", "if", "then", "else", "propertyNames")
_MANY: Final = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED: Final = ("properties", "patternProperties", "$defs")

# A full stop that ends a sentence (not the one of "e.g.").
_SENTENCE_END: Final = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z`])")
# The length of a reference, {"$ref":"#/$defs/name"}: what sharing a subschema costs at each use.
_REF: Final = 28
_DEFS: Final = "#/$defs/"


def compact(schema: Schema, *, key_length: int, nulls: bool = False) -> Schema:
    """``schema`` (a model's JSON schema with its ``$defs``) compacted for an agent.

    ``key_length`` is the longest id the server takes (CPERSONA_MAX_KEY_LENGTH). ``nulls`` keeps
    ``null`` among a field's types, for a tool where a null is a value of its own (a field of
    ``update_memory`` given as null is reset); elsewhere null and a field left out are the same."""
    rules = _Rules(frozenset({("maximum", MAX_COUNT), ("maximum", MAX_TS), ("maxLength", key_length)}), nulls)
    defs = {
        name: _summary(sub) if name in _SUMMARISED else rules.strip(sub)
        for name, sub in schema.get("$defs", {}).items()
    }
    root = rules.strip({key: value for key, value in schema.items() if key not in ("$defs", "description")})
    root["properties"] = {
        name: _scope(sub) if name in SCOPE_FIELDS else sub
        for name, sub in root.get("properties", {}).items()
        if name not in _IGNORED
    }
    root, defs = _inline_single_uses(root, defs)
    return _share(root, defs)


def _subschemas(schema: Schema) -> Iterator[Any]:
    """The subschemas directly under ``schema``."""
    for key, value in schema.items():
        if key in _ONE:
            yield value
        elif key in _MANY:
            yield from value
        elif key in _NAMED:
            yield from value.values()


def _map(schema: Schema, change: Callable[[Any], Any]) -> Schema:
    """``schema`` with ``change`` applied to each subschema directly under it."""
    out: Schema = {}
    for key, value in schema.items():
        if key in _ONE:
            out[key] = change(value)
        elif key in _MANY:
            out[key] = [change(sub) for sub in value]
        elif key in _NAMED:
            out[key] = {name: change(sub) for name, sub in value.items()}
        else:
            out[key] = value
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Rules:
    bounds: frozenset[tuple[str, object]]
    """The limits no caller meets but by mistake, as (keyword, value)."""
    nulls: bool

    def strip(self, schema: Any) -> Any:
        """The subschema without what the module's rules drop."""
        if not isinstance(schema, dict):
            return schema
        if schema.get("pattern") == TIME_TEXT_PATTERN:
            schema = {key: value for key, value in schema.items() if key not in ("pattern", "maxLength")}
            schema["format"] = "date-time"
        if schema.get("description") == EPOCH_TIME_SCHEMA["description"]:
            # date-time text or a number of seconds: the branches say it.
            schema = {key: value for key, value in schema.items() if key != "description"}
        kept = {key: value for key, value in schema.items() if not self._dropped(key, value, schema)}
        if isinstance(kept.get("description"), str):
            kept["description"] = _short(kept["description"])
        return self._nullable(_map(kept, self.strip))

    def _dropped(self, key: str, value: Any, schema: Schema) -> bool:
        if key in ("title", "not") or (key == "additionalProperties" and isinstance(value, bool)):
            return True
        if key == "default":
            return any(value == unset and type(value) is type(unset) for unset in _UNSET)
        if key == "pattern":
            return value in _TEXT_PATTERNS or len(value) > _LONG_PATTERN
        if key in ("anyOf", "oneOf") and "properties" in schema:
            # Branches that constrain the object's own fields, typing nothing: cross-field rules.
            return all("type" not in branch and "$ref" not in branch for branch in value)
        return isinstance(value, int | float) and (key, value) in self.bounds

    def _nullable(self, schema: Schema) -> Schema:
        """``anyOf: [X, {type: null}]`` as X, or (keeping nulls) as ``{type: [x, null], ...}``."""
        branches = schema.get("anyOf")
        if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
            return schema
        other = branches[0] if branches[1] == {"type": "null"} else branches[1]
        rest = {key: value for key, value in schema.items() if key != "anyOf"}
        if not self.nulls:
            return {**other, **rest}
        kind = other.get("type")
        if not isinstance(kind, str) or any(key in other for key in (*_MANY, "$ref", "enum", "const")):
            return schema
        return {**other, **rest, "type": [kind, "null"]}


def _scope(schema: Schema) -> Schema:
    # What it means is in the instructions; that it is not blank nor too long, the server's to check.
    return {key: value for key, value in schema.items() if key not in ("description", "minLength")}


def _summary(schema: Schema) -> Schema:
    """An object schema as its type and the first sentence of its description."""
    out: Schema = {"type": "object"}
    if isinstance(schema.get("description"), str):
        out["description"] = _short(schema["description"])
    return out


def _short(text: str) -> str:
    """The description's first sentence (a model's docstring goes on for the reference), in single
    backticks."""
    first = _SENTENCE_END.split(text.split("\n\n")[0])[0].replace("\n", " ").replace("``", "`")
    return first if first.endswith(".") or first == text else first + "."


def _refs(schema: Any, found: dict[str, int]) -> None:
    """Count in ``found`` the references to each definition in ``schema``."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            found[ref[len(_DEFS) :]] = found.get(ref[len(_DEFS) :], 0) + 1
        for value in schema.values():
            _refs(value, found)
    elif isinstance(schema, list):
        for value in schema:
            _refs(value, found)


def _inline(schema: Any, defs: dict[str, Schema], names: set[str]) -> Any:
    """``schema`` with each reference to one of ``names`` replaced by the definition (its own keys
    beside the reference kept, a description in particular)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref[len(_DEFS) :] in names:
            rest = {key: value for key, value in schema.items() if key != "$ref"}
            return {**_inline(defs[ref[len(_DEFS) :]], defs, names), **rest}
        return {key: _inline(value, defs, names) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline(value, defs, names) for value in schema]
    return schema


def _inline_single_uses(root: Schema, defs: dict[str, Schema]) -> tuple[Schema, dict[str, Schema]]:
    """Put each definition referenced once, or empty, back where it is used (unless it refers to
    itself), and drop the ones nothing references (the fields of a summarised object)."""
    counts: dict[str, int] = {}
    _refs([root, *defs.values()], counts)
    names = set()
    for name, count in counts.items():
        own: dict[str, int] = {}
        _refs(defs.get(name), own)
        if (count == 1 or not defs.get(name)) and name not in own:
            names.add(name)
    kept = {name: _inline(sub, defs, names) for name, sub in defs.items() if counts.get(name, 0) > 0}
    kept = {name: sub for name, sub in kept.items() if name not in names}
    return _inline(root, defs, names), kept


def _key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _shape(schema: Schema) -> str:
    """The canonical JSON of ``schema`` but its description: two fields of one shape share it, each
    keeping its own description beside the reference."""
    return _key({key: value for key, value in schema.items() if key != "description"})


def _occurrences(schema: Any, found: dict[str, list[str | None]], *, top: bool) -> None:
    """Collect in ``found`` the description of every subschema of ``schema`` by its shape (not
    ``schema`` itself when ``top``)."""
    if not isinstance(schema, dict):
        return
    if not top and "$ref" not in schema:
        found.setdefault(_shape(schema), []).append(schema.get("description"))
    for sub in _subschemas(schema):
        _occurrences(sub, found, top=False)


def _share(root: Schema, defs: dict[str, Schema]) -> Schema:
    """Declare in ``$defs`` each subschema that is shorter referenced than written out at every use,
    the largest saving first; put back a definition left with one use."""
    while True:
        found: dict[str, list[str | None]] = {}
        for top, sub in ((True, root), *((False, sub) for sub in defs.values())):
            _occurrences(sub, found, top=top)
        # Written out n times, against once in $defs and n references.
        gains = {key: len(uses) * (len(key) - _REF) - len(key) for key, uses in found.items()}
        best = max(gains, key=lambda key: gains[key], default=None)
        if best is None or gains[best] <= 0:
            break
        shared = json.loads(best)
        descriptions = set(found[best])
        if len(descriptions) == 1 and None not in descriptions:
            shared["description"] = descriptions.pop()  # said once, in the definition
        name = _name(shared, defs)
        said = shared.get("description")
        defs = {key: _swap(sub, best, name, top=True, said=said) for key, sub in defs.items()}
        root = _swap(root, best, name, top=True, said=said)
        defs[name] = shared
    # A part shared inside another shared part may be left with one use.
    root, defs = _inline_single_uses(root, defs)
    return {**root, "$defs": defs} if defs else root


def _swap(schema: Any, shared: str, name: str, *, top: bool, said: str | None) -> Any:
    """``schema`` with each subschema of the shape ``shared`` a reference to ``name``, beside its own
    description unless that is ``said`` (the definition's)."""
    if not isinstance(schema, dict):
        return schema
    if not top and "$ref" not in schema and _shape(schema) == shared:
        own = schema.get("description")
        return {"$ref": f"{_DEFS}{name}", **({"description": own} if own not in (None, said) else {})}
    return _map(schema, lambda sub: _swap(sub, shared, name, top=False, said=said))


def _name(schema: Schema, taken: dict[str, Schema]) -> str:
    """A short name of what ``schema`` is, not yet taken."""
    kind = schema.get("type")
    if "date-time" in _key(schema):
        base = "time"
    elif (schema.get("minimum"), schema.get("maximum")) == (0, 1):
        base = "unit"
    elif "enum" in schema or "anyOf" in schema:
        base = "choice"
    else:
        base = {"string": "text", "integer": "count"}.get(kind if isinstance(kind, str) else "", "part")
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    return name
