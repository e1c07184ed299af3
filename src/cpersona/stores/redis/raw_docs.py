"""How a raw journal entry is laid out in Redis: its JSON document and back.

Besides the entry, the document carries what its search index (:mod:`.indexes`) reads: the scope and the
session as hex tags (see :mod:`.scope`), and the text analysed as the memory keyword index analyses it
(``grams``, ``stems``, ``tag_short_grams``; see :mod:`.lexical`). A sealed entry's text is not in the
document at all: ``sealed`` holds its ciphertext (:mod:`.sealing`), ``content`` and the derived fields
are empty, so the index holds no word of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.errors import InvalidRequest
from cpersona.model.records import RAW, RawRecord
from cpersona.stores.redis.documents import check_finite, record_form, scope_doc
from cpersona.stores.redis.lexical import doc_grams, doc_short_grams, doc_stems
from cpersona.stores.redis.scope import tag

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.stores.redis.sealing import Sealer

__all__ = ["raw_document", "raw_from_doc", "raw_to_doc"]


def raw_to_doc(rec: RawRecord, sealed: str | None = None) -> dict[str, Any]:
    """The JSON document of a raw entry; ``sealed`` (its text's ciphertext, :mod:`.sealing`) stands in
    for the text, which is then in no field of the document nor in any field the index derives from it."""
    text = rec.content if sealed is None else ""
    check_finite(rec.metadata, rec.meta)
    data = RAW.dump_python(rec, mode="json")
    return {
        "pk": rec.id,
        **scope_doc(rec.scope),
        "session_id": rec.session_id,
        "tag_session": tag(rec.session_id),
        "turn_id": rec.turn_id,
        "topic_id": rec.topic_id,
        "source": rec.source,
        "speaker": rec.speaker,
        "visibility": rec.visibility,
        "secrecy_level": rec.secrecy_level,
        "content": text,
        "grams": doc_grams(text),
        "stems": doc_stems(text),
        "tag_short_grams": doc_short_grams(text),
        "sealed": sealed or "",
        "ts": data["created_at"],
        "metadata": data["metadata"],
        "meta": data["meta"],
        "suppressed": rec.suppressed,
    }


def raw_from_doc(doc: Mapping[str, Any]) -> RawRecord:
    return RAW.validate_python(record_form(doc, created_at="ts"))


def raw_document(rec: RawRecord, sealer: Sealer | None) -> dict[str, Any]:
    """The document of ``rec`` as written: a sealed entry's text sealed by ``sealer``, or refused naming
    ``visibility`` when there is no key to seal it with."""
    if rec.visibility != "sealed":
        return raw_to_doc(rec)
    if sealer is None:
        raise InvalidRequest(
            "visibility",
            "sealed entries are stored encrypted and this engine has no key: set CPERSONA_SEALED_KEY "
            "(an engine on a shared Redis makes none of its own)",
        )
    return raw_to_doc(rec, sealer.seal(rec.id, rec.content))
