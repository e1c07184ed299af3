"""How the reference files of this folder are laid out: indented JSON with each list of numbers on one
line, so a file reads (and diffs) per text. Imported by the scripts beside it, which run as plain scripts
(their folder is on ``sys.path``) in environments that need nothing of cpersona."""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER_LIST = re.compile(r"\[\s*-?[0-9][^\[\]{}\"]*\]")


def dumps(document: dict[str, Any]) -> str:
    """``document`` as indented JSON, each list of numbers on one line, ending in a newline."""
    text = json.dumps(document, ensure_ascii=False, indent=1)
    return (
        _NUMBER_LIST.sub(lambda m: "[" + ", ".join(m.group(0)[1:-1].split()).replace(",,", ",") + "]", text)
        + "\n"
    )
