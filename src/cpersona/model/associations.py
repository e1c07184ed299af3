"""The associative layer's values: entities with aliases, and typed relations between two entities or
between two records; the request models that declare them and ask for a traversal.

Decisions where the reference is silent:

- **Names.** A name, alias or predicate is a non-blank ``KeyText`` (at most ``CPERSONA_MAX_KEY_LENGTH``
  characters, no control character). It is kept as declared for display and matched by its *key*:
  NFKC, casefolded, whitespace runs collapsed to one space, trimmed (``"  ALICE\u3000Smith"`` and
  ``"alice smith"`` are one entity). Predicates are stored by their key only.
- **Bounds per declaration.** At most ``CPERSONA_MAX_ASSOCIATION_ENTITIES`` entities (64), each with at
  most ``CPERSONA_MAX_ASSOCIATION_ALIASES`` aliases (32), and ``CPERSONA_MAX_ASSOCIATION_RELATIONS``
  relations (128). A declaration that names nothing is refused.
- **Relation ends.** Both ends are entity names, or both are record refs (``mem:<uuid>``/``ep:<uuid>``);
  a mixed relation, a raw entry's ref, or a relation from a thing to itself is refused naming
  ``relations[i].object`` (or ``.subject``). The ends of an entity relation become entities (name only).
- The same entity named twice in one declaration is one entity with the union of its aliases; an alias
  whose key is the entity's own is dropped.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from cpersona.model.fields import TAG, WHOLE, AgentId, Header, KeyText, Limit, RequestModel, refusal
from cpersona.model.memory_parts import AssociationBody
from cpersona.model.record_queries import UUID_PATTERN
from cpersona.model.records import Association, parse_ref
from cpersona.model.wording import pattern_in_words

__all__ = [
    "StoreAssociations",
    "store_declaration",
    "store_edges",
    "AssociationsBody",
    "Declaration",
    "DeclareRequest",
    "Entity",
    "EntityBody",
    "Relation",
    "RelationBody",
    "TraverseRequest",
    "name_key",
]

_SPACE = re.compile(r"\s+")

NameText = AgentId
"""A name, alias or predicate: a non-blank ``KeyText``."""


def name_key(text: str) -> str:
    """The form a name is matched by: NFKC, casefolded, whitespace collapsed, trimmed."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return _SPACE.sub(" ", folded).strip()


@dataclasses.dataclass(frozen=True, slots=True)
class Entity:
    """An entity as declared: its display name, its key, and its aliases (display form)."""

    name: str
    aliases: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return name_key(self.name)

    def alias_keys(self) -> dict[str, str]:
        """Each alias's key and the first display form declared for it (the name's own key left out)."""
        out: dict[str, str] = {}
        for alias in self.aliases:
            key = name_key(alias)
            if key and key != self.key:
                out.setdefault(key, alias)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Relation:
    """``subject --predicate--> object``: between two entities (their display names) or two record refs."""

    subject: str
    predicate: str
    object: str
    kind: Literal["entity", "record"]

    @property
    def predicate_key(self) -> str:
        return name_key(self.predicate)


@dataclasses.dataclass(frozen=True, slots=True)
class Declaration:
    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()

    def relation_entities(self) -> tuple[Entity, ...]:
        """The ends of the entity relations, as entities (names only)."""
        ends = [e for r in self.relations if r.kind == "entity" for e in (r.subject, r.object)]
        return tuple(Entity(name) for name in ends)

    def record_refs(self) -> tuple[str, ...]:
        """The refs the record relations name, each once, in order."""
        refs = [ref for r in self.relations if r.kind == "record" for ref in (r.subject, r.object)]
        return tuple(dict.fromkeys(refs))


def _is_ref(text: str) -> bool:
    return parse_ref(text) is not None


def _end_kind(value: str) -> Literal["entity", "record"]:
    parsed = parse_ref(value)
    if parsed is None:
        return "entity"
    if parsed.kind == "raw":
        raise refusal("raw_ref", "names a raw journal entry; a relation joins memories or episodes")
    return "record"


_ANY_REF = f"^(mem|ep|raw):{UUID_PATTERN}$"
_RECORD_REF = pattern_in_words(f"^(mem|ep):{UUID_PATTERN}$", "a record ref: mem:<uuid> or ep:<uuid>")


def _name_schema(schema: dict[str, Any]) -> None:
    # What the validators below refuse, said in the schema too: a name is not a ref.
    schema["properties"]["name"]["not"] = {"pattern": _ANY_REF}


def _relation_schema(schema: dict[str, Any]) -> None:
    # Both ends record refs (memories or episodes), or both names; a raw ref is neither.
    ends = ("subject", "object")
    schema["anyOf"] = [
        {"properties": {end: {"pattern": _RECORD_REF} for end in ends}},
        {"properties": {end: {"not": {"pattern": _ANY_REF}} for end in ends}},
    ]


def _some_schema(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [
        {"required": [name], "properties": {name: {"minItems": 1}}} for name in ("entities", "relations")
    ]


class EntityBody(RequestModel):
    model_config = ConfigDict(json_schema_extra=_name_schema)

    name: NameText
    aliases: Annotated[Sequence[NameText], Limit("max_association_aliases", items=True)] = ()

    @field_validator("name")
    @classmethod
    def _not_a_ref(cls, value: str) -> str:
        if _is_ref(value):
            raise refusal("ref_name", "is a record ref; an entity's name is a name")
        if not name_key(value):
            raise refusal("blank", "must not be empty or only whitespace")
        return value


class RelationBody(RequestModel):
    model_config = ConfigDict(json_schema_extra=_relation_schema)

    subject: NameText
    predicate: NameText
    object: NameText

    @field_validator("subject")
    @classmethod
    def _subject(cls, value: str) -> str:
        _end_kind(value)
        return value

    @field_validator("object")
    @classmethod
    def _object(cls, value: str, info: ValidationInfo) -> str:
        kind = _end_kind(value)
        subject = info.data.get("subject")
        if subject is None:
            return value
        if kind != _end_kind(subject):
            raise refusal(
                "mixed_relation",
                "must be of the subject's kind: both entity names or both record refs (mem:/ep:)",
            )
        # A relation from a thing to itself is kept as declared: it is well-formed, and the walk and the
        # bundling, which visit each end once, pass over it.
        return value

    def relation(self) -> Relation:
        kind = _end_kind(self.subject)
        if kind == "record":
            return Relation(self.subject.lower(), self.predicate, self.object.lower(), kind)
        return Relation(self.subject, self.predicate, self.object, kind)


class AssociationsBody(RequestModel):
    """``{entities: [{name, aliases}], relations: [{subject, predicate, object}]}``."""

    model_config = ConfigDict(title="Associations", json_schema_extra=_some_schema)

    entities: Annotated[Sequence[EntityBody], Limit("max_association_entities", items=True)] = ()
    relations: Annotated[Sequence[RelationBody], Limit("max_association_relations", items=True)] = ()

    @model_validator(mode="after")
    def _something(self) -> AssociationsBody:
        if not self.entities and not self.relations:
            raise refusal("empty", "names no entity and no relation")
        return self

    def declaration(self) -> Declaration:
        merged: dict[str, tuple[str, list[str]]] = {}
        for body in self.entities:
            _, aliases = merged.setdefault(name_key(body.name), (body.name, []))
            aliases.extend(a for a in body.aliases if a not in aliases)
        entities = tuple(Entity(name, tuple(aliases)) for name, aliases in merged.values())
        relations = tuple(dict.fromkeys(r.relation() for r in self.relations))
        return Declaration(entities, relations)


class DeclareRequest(RequestModel):
    """Declare (or with ``retract``, remove) associations in one scope, optionally about one record."""

    model_config = ConfigDict(title="DeclareAssociationsRequest")

    agent_id: AgentId
    associations: AssociationsBody
    anchor_ref: Annotated[str, Field(pattern=_RECORD_REF)] | None = Field(
        default=None, description="mem:<uuid> or ep:<uuid>: the declared entities become its mentions"
    )
    retract: bool = False
    project_id: KeyText | None = Field(default=None, description="The declaration's project (default '')")
    channel: KeyText | None = Field(default=None, description="The declaration's channel (default '')")
    header: Header = None


class TraverseRequest(RequestModel):
    """The records reached from an entity over entity relations, breadth-first."""

    model_config = ConfigDict(title="TraverseRequest")

    agent_id: AgentId
    entity: NameText
    max_hops: Annotated[int, Field(ge=0, le=5), WHOLE] = 1
    limit: Annotated[int, Field(ge=1, le=100), WHOLE] = 20
    project_id: KeyText | None = None
    channel: KeyText | None = None
    source_id: KeyText = ""
    header: Header = None


def _store_branch(value: Any) -> str:
    return f"{TAG}declared" if isinstance(value, Mapping | AssociationsBody) else f"{TAG}edges"


StoreAssociations = Annotated[
    Annotated[Sequence[AssociationBody], Tag(f"{TAG}edges")]
    | Annotated[AssociationsBody, Tag(f"{TAG}declared")],
    Discriminator(_store_branch),
    Field(
        description="Cerememory's typed edges (a list), or CPersona's declaration "
        "{entities, relations} (an object), whose entities become the new memory's mentions"
    ),
]
"""A store's ``associations``: a list is Cerememory's edges, an object the associative layer's."""


def store_edges(
    value: Sequence[AssociationBody] | AssociationsBody | None, now: float
) -> tuple[Association, ...]:
    """A store's Cerememory edges (none when it declared the associative layer's)."""
    if value is None or isinstance(value, AssociationsBody):
        return ()
    return tuple(a.association(now) for a in value)


def store_declaration(value: Sequence[AssociationBody] | AssociationsBody | None) -> Declaration | None:
    """A store's associative declaration, if its ``associations`` was one."""
    return value.declaration() if isinstance(value, AssociationsBody) else None
