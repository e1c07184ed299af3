"""``cpersona keys create|list|revoke``: API keys, straight in the store.

The command needs no key and no server: whoever can read the data dir (and so the embedded Redis's
password) or reach ``CPERSONA_REDIS_URL`` administers its keys, which is how the first admin key is made.
It talks to the Redis of a running engine when there is one (``redis/redis.url``), else starts the
embedded server for the moment (:func:`~cpersona.stores.attach.key_store`). ``create`` prints the key
once; it is not kept (its SHA-256 is).
"""

from __future__ import annotations

import datetime
import sys
from typing import TYPE_CHECKING, TextIO

import orjson

from cpersona.edges.cli.outcomes import EXIT_FAILED, EXIT_OK
from cpersona.model.api_keys import CreatedKey, CreateKeyRequest, KeyId, KeyListResponse, RevokedKey
from cpersona.model.fields import check, validate
from cpersona.stores.attach import key_store

if TYPE_CHECKING:
    import argparse

    from cpersona.model.api_keys import ApiKey
    from cpersona.settings import Settings

__all__ = ["add_keys_parser", "keys_command"]


def add_keys_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("keys", help="make, list and revoke API keys")
    actions = p.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    made = actions.add_parser("create", parents=[common], help="make a key (printed once)")
    made.add_argument("--agent", action="append", default=[], help="an agent the key may act for (repeat it)")
    made.add_argument("--admin", action="store_true", help="every agent, and the admin routes")
    made.add_argument("--name", help="a label for people")
    made.add_argument("--json", action="store_true", help="print the answer as JSON")
    listed = actions.add_parser("list", parents=[common], help="every key, without secrets")
    listed.add_argument("--json", action="store_true", help="print the answer as JSON")
    gone = actions.add_parser("revoke", parents=[common], help="revoke a key by its id")
    gone.add_argument("key_id", help="the key's id (the 12 hex digits after cpk_)")
    gone.add_argument("--json", action="store_true", help="print the answer as JSON")


async def keys_command(settings: Settings, args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``cpersona keys ACTION``; its exit code."""
    out = sys.stdout if out is None else out
    # Checked before any Redis is reached: a bad request is a 400-like exit, not a start of a server.
    if args.keys_command == "create":
        req = validate(CreateKeyRequest, _create_body(args), settings)
    elif args.keys_command == "revoke":
        key_id = check(KeyId, args.key_id, "key_id", settings)
    async with key_store(settings) as store:
        if args.keys_command == "create":
            token, info = await store.create(req.agents, admin=req.admin, name=req.name)
            _print_created(CreatedKey(key=token, info=info), args.json, out)
            return EXIT_OK
        if args.keys_command == "list":
            _print_list(KeyListResponse(keys=await store.list()), args.json, out)
            return EXIT_OK
        revoked = RevokedKey(key_id=key_id, revoked=await store.revoke(key_id))
    if args.json:
        print(revoked.model_dump_json(), file=out)
    else:
        print(f"revoked {key_id}" if revoked.revoked else f"no key {key_id}", file=out)
    return EXIT_OK if revoked.revoked else EXIT_FAILED


def _create_body(args: argparse.Namespace) -> dict[str, object]:
    body: dict[str, object] = {"agents": list(args.agent), "admin": bool(args.admin)}
    if args.name is not None:
        body["name"] = args.name
    return body


def _print_created(created: CreatedKey, as_json: bool, out: TextIO) -> None:
    if as_json:
        print(orjson.dumps(created.model_dump(mode="json")).decode(), file=out)
        return
    print(created.key, file=out)
    print(f"# {_describe(created.info)} — shown once; send it as 'Authorization: Bearer <key>'", file=out)


def _print_list(listed: KeyListResponse, as_json: bool, out: TextIO) -> None:
    if as_json:
        print(orjson.dumps(listed.model_dump(mode="json")).decode(), file=out)
        return
    if not listed.keys:
        # On stderr: stdout holds one key per line, and a script reading it finds none.
        print("no API keys; make one with: cpersona keys create --agent AGENT (or --admin)", file=sys.stderr)
        return
    for key in listed.keys:
        print(_describe(key), file=out)


def _describe(key: ApiKey) -> str:
    made = datetime.datetime.fromtimestamp(key.created_at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    scope = "admin (every agent)" if key.admin else "agents " + ", ".join(key.agents)
    name = f" {key.name!r}" if key.name else ""
    return f"{key.key_id}{name} {scope}, made {made}"
