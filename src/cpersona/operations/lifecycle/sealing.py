"""Encrypted archives: AES-256-GCM under a key stretched from the caller's passphrase with scrypt.

Layout: ``MAGIC ‖ salt (16) ‖ nonce (12) ‖ ciphertext with its 16-byte tag``; the magic is also the
cipher's associated data, so a changed header fails like a changed body. A fresh salt and nonce per
archive, so the same archive encrypted twice gives different bytes (which is why only the plain archive
is byte-identical across a round trip). scrypt with n = 2^15, r = 8, p = 1 (32 MiB, some 0.1 s): a
passphrase guessed offline costs that much per guess. The reference uses Argon2id and ChaCha20-Poly1305,
so its encrypted archives and ours do not open each other; plain archives do not either (different line
forms), so nothing is lost.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from cpersona.errors import InvalidRequest

__all__ = ["MAGIC", "is_sealed", "open_sealed", "seal"]

MAGIC = b"CPERSONA-ARCHIVE-AES256GCM-SCRYPT-1\n"
_SALT, _NONCE = 16, 12


def _key(passphrase: str, salt: bytes) -> bytes:
    return Scrypt(salt=salt, length=32, n=2**15, r=8, p=1).derive(passphrase.encode())


def is_sealed(data: bytes) -> bool:
    return data.startswith(MAGIC)


def seal(plain: bytes, passphrase: str) -> bytes:
    salt, nonce = os.urandom(_SALT), os.urandom(_NONCE)
    return MAGIC + salt + nonce + AESGCM(_key(passphrase, salt)).encrypt(nonce, plain, MAGIC)


def open_sealed(data: bytes, passphrase: str) -> bytes:
    """The plain archive; a wrong passphrase or a changed archive is refused naming ``decryption_key``."""
    body = data[len(MAGIC) :]
    if len(body) < _SALT + _NONCE + 16:
        raise InvalidRequest("archive_data", "is an encrypted archive cut short")
    salt, nonce, sealed = body[:_SALT], body[_SALT : _SALT + _NONCE], body[_SALT + _NONCE :]
    try:
        return AESGCM(_key(passphrase, salt)).decrypt(nonce, sealed, MAGIC)
    except InvalidTag:
        raise InvalidRequest(
            "decryption_key", "does not open this archive: a wrong key, or the archive was changed"
        ) from None
