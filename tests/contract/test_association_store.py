"""The associations contract (:class:`~cpersona.stores.association_store.AssociationStore`), on every
adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.contract_records import Roles, memory, put
from cpersona.errors import BackendUnavailable
from cpersona.model.associations import Declaration, Entity, Relation
from cpersona.model.records import Scope, new_id
from cpersona.model.scope import ReadScope
from cpersona.stores.association_values import DeclareCounts, EntityLinks, IndexedEntity, Link, RecordLinks
from cpersona.stores.record_values import MemoryWrite

if TYPE_CHECKING:
    from cpersona.stores.association_store import AssociationStore
    from cpersona.stores.record_writes import RecordWrites


async def test_associations_are_written_with_the_record_and_read_in_scope(
    associations: AssociationStore, record_writes: RecordWrites
) -> None:
    # A store's declaration goes into the record's own transaction; the read sees it only from a scope
    # that may read the scope it was declared in (here the record's: project p).
    rec = memory("Ann met Ben", 1, project="p")
    declared = Declaration((Entity("Ann", ("Annie",)), Entity("Ben")))
    await record_writes.put_memories([MemoryWrite(rec, (), declared)], queue_blocks=False)
    index = await associations.entity_index(ReadScope("a", "p"))
    assert index == [IndexedEntity("ann", "Ann", (("annie", "Annie"),)), IndexedEntity("ben", "Ben")]
    assert await associations.entity_index(ReadScope("a", "")) == []
    assert await associations.entity_index(ReadScope("b")) == []
    links = await associations.entity_links(ReadScope("a"), ["ann", "nobody"])
    assert links == {"ann": EntityLinks((rec.ref,)), "nobody": EntityLinks()}
    assert (await associations.record_links(ReadScope("a", "p"), [rec.ref]))[rec.ref] == RecordLinks(
        ("ann", "ben")
    )


async def test_no_read_returns_what_another_agent_declared(
    associations: AssociationStore, record_writes: RecordWrites
) -> None:
    theirs = memory("Ann again", 1, agent="b")
    await put(record_writes, theirs)
    declared = Declaration((Entity("Ann"),), (Relation("Ann", "Knows", "Ben", "entity"),))
    await associations.declare_associations(Scope("b"), declared, anchor_ref=theirs.ref, retract=False)
    scope = ReadScope("a")
    assert await associations.entity_index(scope) == []
    assert await associations.entity_links(scope, ["ann"]) == {"ann": EntityLinks()}
    assert await associations.record_links(scope, [theirs.ref]) == {theirs.ref: RecordLinks()}
    assert await associations.visible_refs(scope, [theirs.ref]) == []
    assert await associations.association_graphs("a") == []
    assert await associations.delete_agent_associations("a") == 0
    assert [e.key for e in await associations.entity_index(ReadScope("b"))] == ["ann", "ben"]


async def test_a_declaration_is_idempotent_and_a_relation_is_seen_from_both_ends(
    associations: AssociationStore,
) -> None:
    scope = Scope("a", "", "c")
    declared = Declaration(relations=(Relation("Ann", "Knows", "Ben", "entity"),))
    first = await associations.declare_associations(scope, declared, anchor_ref=None, retract=False)
    assert first == DeclareCounts(entities=2, relations=1)
    again = await associations.declare_associations(scope, declared, anchor_ref=None, retract=False)
    assert again == DeclareCounts()
    links = await associations.entity_links(ReadScope("a", channel="c"), ["ann", "ben"])
    assert links["ann"].relations == (Link("out", "knows", "ben"),)
    assert links["ben"].relations == (Link("in", "knows", "ann"),)
    assert (await associations.entity_links(ReadScope("a", channel="d"), ["ann"]))["ann"] == EntityLinks()
    gone = await associations.declare_associations(scope, declared, anchor_ref=None, retract=True)
    assert gone == DeclareCounts(relations=1)
    assert (await associations.entity_links(ReadScope("a"), ["ben"]))["ben"] == EntityLinks()


async def test_forgetting_a_record_removes_its_mentions_and_both_ends_of_its_relations(
    associations: AssociationStore, record_writes: RecordWrites
) -> None:
    one, two = memory("one", 1), memory("two", 2)
    await put(record_writes, one, two)
    declared = Declaration((Entity("Ann"),), (Relation(one.ref, "supports", two.ref, "record"),))
    await associations.declare_associations(Scope("a"), declared, anchor_ref=one.ref, retract=False)
    assert await associations.visible_refs(ReadScope("a"), [one.ref, two.ref, "mem:" + new_id()]) == [
        one.ref,
        two.ref,
    ]
    assert (await associations.record_links(ReadScope("a"), [two.ref]))[two.ref].relations == (
        Link("in", "supports", one.ref),
    )
    await record_writes.delete("memory", one.id, ())
    await associations.forget_record_associations("a", one.ref)
    assert (await associations.record_links(ReadScope("a"), [two.ref]))[two.ref] == RecordLinks()
    assert (await associations.entity_links(ReadScope("a"), ["ann"]))["ann"] == EntityLinks()
    assert await associations.visible_refs(ReadScope("a"), [one.ref, two.ref]) == [two.ref]
    assert await associations.delete_agent_associations("a") > 0
    assert await associations.entity_index(ReadScope("a")) == []


async def test_an_archived_graph_restores_under_another_agent_and_twice_changes_nothing(
    associations: AssociationStore,
) -> None:
    declared = Declaration((Entity("Ann", ("Annie",)),), (Relation("Ann", "Knows", "Ben", "entity"),))
    await associations.declare_associations(Scope("a", "p"), declared, anchor_ref=None, retract=False)
    graphs = await associations.association_graphs("a")
    await associations.restore_association_graphs("c", graphs)
    await associations.restore_association_graphs("c", graphs)
    assert await associations.entity_index(ReadScope("c", "p")) == await associations.entity_index(
        ReadScope("a", "p")
    )
    assert await associations.association_graphs("c") == graphs


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    store = unreachable.associations
    for retract in (False, True):
        with pytest.raises(BackendUnavailable):
            await store.declare_associations(
                Scope("a"), Declaration((Entity("Ann"),)), anchor_ref=None, retract=retract
            )
    with pytest.raises(BackendUnavailable):
        await store.entity_index(ReadScope("a"))
    with pytest.raises(BackendUnavailable):
        await store.forget_record_associations("a", "mem:" + new_id())
    with pytest.raises(BackendUnavailable):
        await store.delete_agent_associations("a")
