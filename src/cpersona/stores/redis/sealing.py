"""Sealed raw entries: their text encrypted before it reaches Redis, and the key that opens it.

A raw entry written with ``visibility: sealed`` keeps its labels (scope, session, times, visibility,
secrecy) in the clear, so a query can filter on them, but its text only as AES-256-GCM ciphertext, made
in this process: the text is in no Redis key, in no search index, in no AOF or snapshot file, and no
client of the Redis server can read it. Each ciphertext is bound to its entry's id (the GCM associated
data), so one copied into another entry's document does not open. The layout, base64 in the document's
``sealed`` field: ``0x01`` (the format) ‖ a random 12-byte nonce ‖ ciphertext ‖ 16-byte tag.

The key (32 bytes) is ``CPERSONA_SEALED_KEY``, as 64 hex digits or base64. Without it, an engine with its
own embedded Redis uses ``<data_dir>/sealed.key``, made once (mode 0600) when it first opens: that keeps
the text out of Redis and its files, though not from whoever can read the whole data dir. An engine on a
shared Redis (``CPERSONA_REDIS_URL``) makes no key of its own (engines on other hosts could not share it):
without ``CPERSONA_SEALED_KEY`` it refuses sealed writes, naming ``visibility``.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import stat
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cpersona.errors import InvalidSetting

if TYPE_CHECKING:
    from pathlib import Path

    from cpersona.settings import Settings

__all__ = ["KEY_FILE", "Sealer", "SealedUnreadable", "load_sealer"]

log = logging.getLogger("cpersona")

KEY_FILE = "sealed.key"
"""The key's file in an embedded engine's data dir."""
_KEY_BYTES = 32
_NONCE_BYTES = 12
_FORMAT = b"\x01"
_SETTING = "CPERSONA_SEALED_KEY"


class SealedUnreadable(InvalidSetting):
    """A sealed entry that the configured key does not open (another key, or a damaged document)."""

    def __init__(self, record_id: str) -> None:
        super().__init__(_SETTING, f"does not open the sealed raw entry {record_id}")


class Sealer:
    """Seals and opens raw entries' text with one key."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != _KEY_BYTES:
            raise InvalidSetting(_SETTING, f"must be {_KEY_BYTES} bytes, got {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, record_id: str, text: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, text.encode(), _bound(record_id))
        return base64.b64encode(_FORMAT + nonce + sealed).decode()

    def open(self, record_id: str, blob: str) -> str:
        try:
            raw = base64.b64decode(blob, validate=True)
            if raw[:1] != _FORMAT:
                raise SealedUnreadable(record_id)
            nonce, sealed = raw[1 : 1 + _NONCE_BYTES], raw[1 + _NONCE_BYTES :]
            return self._aead.decrypt(nonce, sealed, _bound(record_id)).decode()
        except (InvalidTag, binascii.Error, ValueError):
            raise SealedUnreadable(record_id) from None


def _bound(record_id: str) -> bytes:
    return f"cpersona-raw:{record_id}".encode()


def load_sealer(settings: Settings) -> Sealer | None:
    """The sealer of ``settings``: from ``CPERSONA_SEALED_KEY``, else (embedded Redis only) the data dir's
    key file, made if missing; ``None`` on a shared Redis without the setting."""
    if settings.sealed_key is not None:
        return Sealer(parse_key(settings.sealed_key.get_secret_value()))
    if not settings.embedded_redis:
        return None
    return Sealer(_data_dir_key(settings.data_dir / KEY_FILE))


def parse_key(text: str) -> bytes:
    """A key written as 64 hex digits or as base64 (standard or URL-safe) of 32 bytes."""
    value = text.strip()
    try:
        hexed = len(value) == 2 * _KEY_BYTES
        key = bytes.fromhex(value) if hexed else base64.b64decode(_std(value), validate=True)
    except (ValueError, binascii.Error):
        key = b""
    if len(key) != _KEY_BYTES:
        raise InvalidSetting(_SETTING, f"must be {_KEY_BYTES} bytes written as 64 hex digits or base64")
    return key


def _std(value: str) -> str:
    return value.replace("-", "+").replace("_", "/")


def _data_dir_key(path: Path) -> bytes:
    """The key in ``path``, written there first (0600, never replaced) when the file does not exist."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)
    try:
        os.write(fd, os.urandom(_KEY_BYTES).hex().encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s is readable by other users (mode %o); chmod 600 it", path, stat.S_IMODE(mode))
    try:
        return parse_key(path.read_text())
    except InvalidSetting:
        raise InvalidSetting(_SETTING, f"is not set and {path} holds no key (64 hex digits)") from None
