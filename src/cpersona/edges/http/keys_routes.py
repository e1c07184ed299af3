"""The API-key routes (``/v1/keys``): make, list and revoke keys. With keys in force only an admin key
reaches them (:mod:`.auth`); with keys off they are as open as every other route of a loopback server.
Added to the route table by :data:`KEY_OPERATIONS`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.operation import NoQuery, Operation
from cpersona.edges.http.reading import read_body, read_query
from cpersona.edges.http.state import engine_of, services_of
from cpersona.errors import InvalidRequest
from cpersona.model.api_keys import CreatedKey, CreateKeyRequest, KeyId, KeyListResponse, RevokedKey

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["KEY_OPERATIONS", "KeyNotFound"]


class KeyNotFound(InvalidRequest):
    """No API key has the id a revoke names (``key_id``)."""

    code = "KEY_NOT_FOUND"
    status = 404


async def _create(request: Request) -> Response:
    req = await read_body(request, CreateKeyRequest)
    created = await services_of(request).keys.create(req)
    return ORJSONResponse(created.model_dump(mode="json"))


async def _list(request: Request) -> Response:
    read_query(request, NoQuery)
    return ORJSONResponse((await services_of(request).keys.list()).model_dump(mode="json"))


async def _revoke(request: Request) -> Response:
    read_query(request, NoQuery)
    revoked = await engine_of(request).revoke_key(request.path_params["key_id"])
    if not revoked.revoked:
        # As a DELETE of any other thing that is not there; a 200 read as done to a typo in the id.
        raise KeyNotFound("key_id", f"no API key has the id {revoked.key_id!r}")
    return ORJSONResponse(revoked.model_dump(mode="json"))


_ADMIN = (400, 401, 403, 503)

KEY_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/keys",
        _create,
        "Make an API key bound to agents, or an admin key (admin only)",
        CreatedKey,
        body=CreateKeyRequest,
        errors=(*_ADMIN, 507),
        description="The answer's `key` is the bearer token, shown this once; only its SHA-256 is kept.",
    ),
    Operation(
        "GET",
        "/v1/keys",
        _list,
        "Every API key, without secrets (admin only)",
        KeyListResponse,
        errors=_ADMIN,
    ),
    Operation(
        "DELETE",
        "/v1/keys/{key_id}",
        _revoke,
        "Revoke an API key (admin only)",
        RevokedKey,
        errors=(*_ADMIN, 404, 507),
        path_params={"key_id": KeyId},
        description="The next request with the key is refused (401), on every worker. No key of that id "
        "is a 404 KEY_NOT_FOUND naming `key_id`.",
    ),
)
