"""The isolation table, written out independently of ``ReadScope.sees``, and generated stores and reads
to hold a search to it: the property tests of isolation and the arms that filter by scope share them."""

from __future__ import annotations

from hypothesis import strategies as st

from cpersona.model.scope import ReadScope

AGENTS = ["a", "b", "a:b", "\uff41"]  # the last is a full-width "a": a different agent
PROJECTS = ["", "p", "q", "p:x"]
CHANNELS = ["", "c", "d"]
SOURCES = ["", "discord:1", "discord:2", "slack:1", "x"]

record_st = st.tuples(
    st.sampled_from(AGENTS), st.sampled_from(PROJECTS), st.sampled_from(CHANNELS), st.sampled_from(SOURCES)
)
scope_st = st.builds(
    ReadScope,
    agent_id=st.sampled_from(AGENTS),
    project_id=st.one_of(st.none(), st.sampled_from(PROJECTS)),
    channel=st.one_of(st.none(), st.sampled_from(CHANNELS)),
    source_id=st.sampled_from(["", "discord:", "discord:1", "slack:1", "x", "disc"]),
)


def visible(read: ReadScope, agent: str, project: str, channel: str, source: str) -> bool:
    """The isolation table written out independently of ``ReadScope.sees``."""
    if agent != read.agent_id:
        return False
    if read.project_id is not None:
        if read.project_id == "" and project != "":
            return False
        if read.project_id != "" and project not in (read.project_id, ""):
            return False
    if read.channel and channel not in (read.channel, ""):
        return False
    if read.source_id:
        if read.source_id[-1].isalnum():
            return source == read.source_id
        return source.startswith(read.source_id)
    return True
