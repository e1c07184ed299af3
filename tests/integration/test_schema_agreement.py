"""The OpenAPI document and the validation say the same thing (issue 13, item 11).

What the document allows the server accepts, and what it forbids the server refuses: each case here is
one schemathesis found (benchmarks/fuzz.sh runs it against a live server). A pattern the document shows
is checked against the validator it stands for on generated text, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpersona import InvalidRequest
from cpersona.edges.http.app import openapi_document
from cpersona.model.agent_requests import ProfileRequest
from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import AgentId, ContentText, KeyText, check, validate
from cpersona.model.lifecycle_requests import ImportRequest
from cpersona.model.memory_request import StoreRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.model.record_queries import ListQuery
from cpersona.model.update_request import UpdateRequest
from cpersona.settings import Settings

if TYPE_CHECKING:
    import httpx


SETTINGS = Settings()
DOC = openapi_document(SETTINGS)
SCHEMAS = DOC["components"]["schemas"]
AGENT = "agreement-agent"
REF = "mem:01900000-0000-7000-8000-000000000000"


def _matches(pattern: str, text: str) -> bool:
    # The document's patterns are anchored (^…$); Python's $ would also match before a final newline.
    assert pattern.startswith("^")
    assert pattern.endswith("$")
    return re.fullmatch(pattern[1:-1], text) is not None


def _accepts(kind: Any, value: object) -> bool:
    try:
        check(kind, value, "field", SETTINGS)
    except InvalidRequest:
        return False
    return True


def _parameter(path: str, method: str, name: str) -> dict[str, Any]:
    params: list[dict[str, Any]] = DOC["paths"][path][method]["parameters"]
    return next(p for p in params if p["name"] == name)


def _string_branch(schema: dict[str, Any]) -> dict[str, Any]:
    branches = schema.get("oneOf") or schema.get("anyOf") or [schema]
    for branch in branches:
        if branch.get("type") == "string":
            return dict(branch)
        found = _string_branch(branch) if "oneOf" in branch or "anyOf" in branch else None
        if found:
            return found
    return {}


# Text that reaches every corner of the patterns: controls, the spaces Python strips, and the rest (no
# lone surrogates: a JSON body cannot carry one, orjson refuses it).
TEXT = st.text(
    st.one_of(
        st.sampled_from("\x00\x01\t\n\r\x0b\x0c\x1c\x1f \x7f\x85\x9f\xa0\u1680\u2000\u2028\u3000\ufeffa"),
        st.characters(codec="utf-8"),
    ),
    max_size=12,
)


# ------------------------------------------------------------------------------------- text fields


@given(TEXT)
def test_the_content_pattern_is_the_content_check(text: str) -> None:
    pattern = _string_branch(SCHEMAS["EncodeRequest"]["properties"]["content"])["pattern"]
    assert _matches(pattern, text) == _accepts(ContentText, text), repr(text)


@given(TEXT)
def test_the_agent_id_pattern_is_the_agent_id_check(text: str) -> None:
    pattern = SCHEMAS["EncodeRequest"]["properties"]["agent_id"]["pattern"]
    assert _matches(pattern, text) == _accepts(AgentId, text), repr(text)


@given(TEXT)
def test_the_key_pattern_is_the_key_check(text: str) -> None:
    pattern = SCHEMAS["EncodeRequest"]["properties"]["project_id"]["pattern"]
    assert _matches(pattern, text) == _accepts(KeyText, text), repr(text)


@given(TEXT)
def test_the_profile_pattern_is_the_profile_check(text: str) -> None:
    pattern = SCHEMAS["ProfileRequest"]["properties"]["profile"]["pattern"]
    accepted = True
    try:
        validate(ProfileRequest, {"profile": text}, SETTINGS)
    except InvalidRequest:
        accepted = False
    assert _matches(pattern, text) == accepted, repr(text)


@given(st.one_of(TEXT, st.sampled_from(["joy", " Anger ", "SAD\n", "happy ", "joyful", "", "\uff4aoy"])))
def test_the_emotion_label_pattern_is_the_label_check(text: str) -> None:
    emotion = SCHEMAS["EncodeRequest"]["properties"]["emotion"]
    pattern = _string_branch(emotion)["pattern"]
    body = {"agent_id": AGENT, "content": "x", "emotion": text}
    accepted = True
    try:
        validate(StoreRequest, body, SETTINGS)
    except InvalidRequest:
        accepted = False
    assert _matches(pattern, text) == accepted, repr(text)


def test_an_empty_emotion_or_time_is_refused_by_the_document_too() -> None:
    emotion = _string_branch(SCHEMAS["EncodeRequest"]["properties"]["emotion"])
    timestamp = _string_branch(SCHEMAS["EncodeRequest"]["properties"]["timestamp"])
    assert not _matches(emotion["pattern"], "")
    assert not _matches(timestamp["pattern"], "")
    for field in ("emotion", "timestamp"):
        with pytest.raises(InvalidRequest) as err:
            validate(StoreRequest, {"agent_id": AGENT, "content": "x", field: ""}, SETTINGS)
        assert err.value.field == field


@given(st.data())
def test_every_time_text_the_document_allows_is_read(data: st.DataObject) -> None:
    pattern = _string_branch(SCHEMAS["EncodeRequest"]["properties"]["timestamp"])["pattern"]
    text = data.draw(st.from_regex(pattern[1:-1], fullmatch=True))
    assert _accepts(EpochTime, text), text


# ------------------------------------------------------------------------------- nulls and headers


@pytest.mark.parametrize(
    ("model", "name", "body"),
    [
        (RecallQuery, "limit", {"agent_id": AGENT, "query": "q"}),
        (RecallQuery, "mode", {"agent_id": AGENT, "query": "q"}),
        (RecallQuery, "policy", {"agent_id": AGENT, "query": "q"}),
        (UpdateRequest, "content", {"agent_id": AGENT}),
    ],
)
def test_a_null_the_model_refuses_is_not_offered(model: Any, name: str, body: dict[str, Any]) -> None:
    title = model.model_config.get("title") or model.__name__
    assert "null" not in str(SCHEMAS[title]["properties"][name]).replace("'default': None", "")
    with pytest.raises(InvalidRequest) as err:
        validate(model, {**body, name: None}, SETTINGS)
    assert err.value.field == name


@pytest.mark.parametrize("header", [5, "h", [1], True])
def test_the_header_is_an_object_as_documented(header: object) -> None:
    schema = SCHEMAS["EncodeRequest"]["properties"]["header"]
    assert {"type": "object", "additionalProperties": True} in schema["anyOf"]
    with pytest.raises(InvalidRequest) as err:
        validate(StoreRequest, {"agent_id": AGENT, "content": "x", "header": header}, SETTINGS)
    assert err.value.field == "header"
    validate(StoreRequest, {"agent_id": AGENT, "content": "x", "header": {"protocol": 1}}, SETTINGS)


def test_the_request_id_header_is_any_text() -> None:
    # A long or odd request id is replaced, never refused: the document limits nothing.
    for path in DOC["paths"].values():
        for operation in path.values():
            header = next(p for p in operation["parameters"] if p["name"] == "x-request-id")
            assert header["schema"] == {"type": "string"}


# ------------------------------------------------------------------------------- numbers and query


def test_the_list_limit_has_bounds_a_schema_reads() -> None:
    schema = _parameter("/v1/records", "get", "limit")["schema"]
    assert (schema["minimum"], schema["maximum"]) == (0, 1000)
    assert "ge" not in schema
    assert "le" not in schema


def test_no_query_parameter_offers_null() -> None:
    for path in DOC["paths"].values():
        for operation in path.values():
            for param in operation["parameters"]:
                assert "null" not in str(param["schema"]), param


def test_a_whole_number_written_with_a_fraction_is_that_number() -> None:
    body = {"agent_id": AGENT, "query": "q"}
    assert validate(RecallQuery, {**body, "limit": 5.0}, SETTINGS).limit == 5
    with pytest.raises(InvalidRequest):
        validate(RecallQuery, {**body, "limit": 5.5}, SETTINGS)
    assert validate(ListQuery, {"agent_id": AGENT, "limit": "7"}, SETTINGS).limit == 7


def test_the_recall_limit_policies_and_cue_rule_are_documented() -> None:
    recall = SCHEMAS["RecallRequest"]
    assert recall["properties"]["limit"]["maximum"] == 100
    assert "single-pass-v0" in recall["properties"]["policy"]["enum"]
    cued = recall["anyOf"][0]["properties"]["policy"]["enum"]
    assert "single-pass-v0" not in cued
    assert "cued-v0.3" in cued
    assert {"type": "object", "maxProperties": 0} in recall["properties"]["time_cue"]["anyOf"]


# ------------------------------------------------------------------------------------ body shapes


def test_a_block_is_text_and_every_block_is_checked_as_content() -> None:
    block = SCHEMAS["ContentBlock"]["properties"]
    assert block["modality"]["const"] == "text"
    blank_second = {"blocks": [{"modality": "text", "data": "fine"}, {"modality": "text", "data": "  "}]}
    spaces_as_bytes = {"blocks": [{"modality": "text", "data": [32, 32]}]}
    for content in (blank_second, spaces_as_bytes):
        with pytest.raises(InvalidRequest) as err:
            validate(StoreRequest, {"agent_id": AGENT, "content": content}, SETTINGS)
        assert err.value.field == "content"
    image = {"blocks": [{"modality": "image", "data": "x"}]}
    with pytest.raises(InvalidRequest, match="only 'text' is supported"):
        validate(StoreRequest, {"agent_id": AGENT, "content": image}, SETTINGS)


def test_an_association_needs_its_type_in_the_document_too() -> None:
    schema = SCHEMAS["AssociationBody"]
    assert [branch["required"] for branch in schema["anyOf"]] == [["type"], ["association_type"]]
    untyped = {"agent_id": AGENT, "content": "x", "associations": [{"target_id": "t", "type": None}]}
    with pytest.raises(InvalidRequest):
        validate(StoreRequest, untyped, SETTINGS)


def test_a_history_timestamp_is_documented_as_a_time() -> None:
    history = SCHEMAS["EpisodeRequest"]["properties"]["history"]
    items = next(branch for branch in history["anyOf"] if branch.get("type") == "array")["items"]
    assert "oneOf" in str(items["properties"]["timestamp"])


def test_an_ago_reaches_as_far_as_its_unit_allows() -> None:
    reach = {
        branch["properties"]["unit"]["const"]: branch["properties"]["value"]["maximum"]
        for branch in SCHEMAS["AgoBody"]["oneOf"]
    }
    assert reach == {"days": 3_652_425, "weeks": 521_775, "months": 121_747}


# ------------------------------------------------------------------------------------ path params


def test_path_parameters_are_typed_as_the_engine_reads_them() -> None:
    ref = _parameter("/v1/records/{ref}", "get", "ref")["schema"]["pattern"]
    assert _matches(ref, REF)
    assert not _matches(ref, "mem:not-a-uuid")
    update = _parameter("/v1/encode/{ref}", "patch", "ref")["schema"]["pattern"]
    assert _matches(update, REF.removeprefix("mem:"))
    assert not _matches(update, "ep:01900000-0000-7000-8000-000000000000")
    agent = _parameter("/v1/profile/{agent_id}", "put", "agent_id")["schema"]
    assert agent["pattern"] == SCHEMAS["EncodeRequest"]["properties"]["agent_id"]["pattern"]
    confirm = _parameter("/v1/agents/{agent_id}", "delete", "confirm")
    assert confirm["required"] is True
    # A boolean, as the MCP tool's confirm and forget's are; the query string's true is read in any case.
    assert confirm["schema"]["type"] == "boolean"


async def test_a_method_a_sibling_path_lacks_is_405_not_an_update(client: httpx.AsyncClient) -> None:
    for path in ("/v1/encode/batch", "/v1/encode/raw"):
        refused = await client.patch(path, json={"agent_id": AGENT})
        assert refused.status_code == 405, refused.text
        assert "PATCH" not in refused.headers["allow"]


async def test_an_agent_id_with_a_newline_in_the_path_is_a_400_naming_it(client: httpx.AsyncClient) -> None:
    refused = await client.get("/v1/profile/a%0Ab")
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == "agent_id"


def test_every_link_leads_to_a_documented_operation_and_its_parameters() -> None:
    # The stateful fuzzing follows these links to records that exist, instead of guessing refs.
    followed = 0
    for path in DOC["paths"].values():
        for operation in path.values():
            for link in operation["responses"]["200"].get("links", {}).values():
                _, _, pointer = link["operationRef"].partition("#/paths/")
                target_path, _, method = pointer.rpartition("/")
                target = DOC["paths"][target_path.replace("~1", "/").replace("~0", "~")][method]
                names = {p["name"] for p in target["parameters"]}
                assert set(link["parameters"]) <= names, link
                followed += 1
    assert followed == 8


def test_an_update_names_a_field_to_change_in_the_document_too() -> None:
    # Found by following UpdateMemory: {"agent_id": …} alone is refused ("names no field to update").
    changes = [branch["required"] for branch in SCHEMAS["UpdateRequest"]["anyOf"]]
    assert changes == [[name] for name in ("content", "metadata", "emotion", "meta", "store", "timestamp")]
    link = DOC["paths"]["/v1/encode"]["post"]["responses"]["200"]["links"]["UpdateMemory"]
    assert link["requestBody"] == {"agent_id": "$request.body#/agent_id"}


@pytest.mark.parametrize(
    ("archive", "accepted"),
    [([123, 10], True), ("ewo=", True), ([256], False), ([-1], False), (["a"], False), (7, False)],
)
def test_an_import_archive_is_documented_as_the_server_takes_it(archive: object, accepted: bool) -> None:
    # Cerememory sends the archive as an array of byte values; base64 text is the other form read.
    schema = SCHEMAS["ImportRequest"]["properties"]["archive_data"]
    assert jsonschema.Draft202012Validator(schema).is_valid(archive) == accepted
    try:
        validate(ImportRequest, {"agent_id": AGENT, "archive_data": archive}, SETTINGS)
    except InvalidRequest:
        assert not accepted
    else:
        assert accepted
