"""The docs' two generated reference pages: configuration (from the settings model) and the HTTP routes
(from the app's OpenAPI document).

    python -m scripts.docs_reference           # write both pages
    python -m scripts.docs_reference --check   # exit 1 naming each page that differs from its source

tests/unit/test_docs_reference.py holds the committed pages equal to what this makes, so a setting added
without a description, or a route added or changed, fails the suite until the page is made again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpersona.edges.http.app import openapi_document
from cpersona.settings import PREFIX, Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pydantic_settings import BaseSettings

__all__ = ["PAGES", "configuration_page", "http_page", "main"]

ROOT = Path(__file__).resolve().parent.parent
_REFRESH = "python -m scripts.docs_reference"
_SCHEMA_PREFIX = "#/components/schemas/"


def configuration_page(model: type[BaseSettings] = Settings) -> str:
    """Every setting of ``model``: its variable, type, default and the field's description."""
    properties: dict[str, Any] = model.model_json_schema()["properties"]
    rows = []
    for name, field in model.model_fields.items():
        variable = PREFIX + name.upper()
        if not field.description:
            raise ValueError(f"{variable} has no description: give its field in settings.py a description=")
        default = "see meaning" if field.default_factory is not None else _value(field.default)
        kind = _type(properties[name])
        rows.append(f"| `{variable}` | {default} | {_cell(field.description)} ({kind}) |")
    return "\n".join(
        [
            "# Configuration",
            "",
            f"<!-- Generated from src/cpersona/settings.py by `{_REFRESH}`; do not edit. -->",
            "",
            "Every setting is an environment variable, read once when the engine, the server or a command "
            "starts. A value that cannot be read stops the start with an error naming the variable, and so "
            f"does a `{PREFIX}*` variable that names no setting: a misspelling is reported with the nearest "
            "setting's name, never silently ignored.",
            "",
            "In Python, `cpersona.open(...)` takes the same settings as keyword arguments without the "
            'prefix, in lower case (`cpersona.open(data_dir="/tmp/mem", embedding_mode="none")`), '
            "and `cpersona.Settings` is the model itself.",
            "",
            "| variable | default | meaning (type) |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )


def _value(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def _type(schema: Mapping[str, Any]) -> str:
    branches = [branch for branch in schema.get("anyOf", [schema]) if branch.get("type") != "null"]
    (only,) = branches
    if "enum" in only:
        return "one of " + ", ".join(f"`{choice}`" for choice in only["enum"])
    kind = {"integer": "integer", "number": "number", "boolean": "boolean"}.get(only["type"])
    if kind is None:
        return {"password": "secret text", "path": "path"}.get(only.get("format", ""), "text")
    low = only.get("minimum")
    above = only.get("exclusiveMinimum")
    high = only.get("maximum")
    if low is not None and high is not None:
        return f"{kind}, {_number(low)} to {_number(high)}"
    if above is not None:
        return f"{kind}, more than {_number(above)}"
    if low is not None:
        return f"{kind}, at least {_number(low)}"
    return kind


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _cell(text: str) -> str:
    return _prose(text).replace("|", "\\|")


def _prose(text: str) -> str:
    """``text`` on one line, its angle brackets outside code spans escaped (``mem:<uuid>`` is no tag)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(
        part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts)
    )


def http_page(document: Mapping[str, Any] | None = None) -> str:
    """Every route of the OpenAPI ``document`` (default: the app's, on the default settings)."""
    document = openapi_document(Settings()) if document is None else document
    operations = [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]
    index = [
        f"| [`{method} {path}`](#{_anchor(method, path)}) | {_cell(operation['summary'])} |"
        for method, path, operation in operations
    ]
    sections = [line for method, path, op in operations for line in _route(method, path, op)]
    return "\n".join(
        [
            "# HTTP API",
            "",
            f"<!-- Generated from the app's OpenAPI document by `{_REFRESH}`; do not edit. -->",
            "",
            "Every route the server answers, as its OpenAPI document describes it. A running server "
            "serves that document at `GET /openapi.json`; the document of this version, on the default "
            "settings, is [openapi.json](openapi.json), with every request and answer schema in full. "
            "Each route's request and answer are the models the Python API takes and returns under the "
            "same names ([Python API](python.md)).",
            "",
            "Every answer carries `x-request-id`, and every error is one envelope, "
            '`{"ok": false, "error": {"code", "message", "field"}, ...}` '
            "([errors](../guides/http.md#errors)).",
            "",
            "| route | what it does |",
            "|---|---|",
            *index,
            "",
            *sections,
        ]
    )


def _anchor(method: str, path: str) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in f"{method} {path}".lower())
    return "-".join(part for part in slug.split("-") if part)


def _route(method: str, path: str, operation: Mapping[str, Any]) -> list[str]:
    out = [f"## `{method} {path}` {{#{_anchor(method, path)}}}", "", _prose(operation["summary"]) + ".", ""]
    if operation.get("description"):
        out += [_prose(operation["description"]), ""]
    parameters = [p for p in operation.get("parameters", []) if p["name"] != "x-request-id"]
    if parameters:
        out += ["| parameter | in | required | meaning |", "|---|---|---|---|"]
        out += [
            f"| `{p['name']}` | {p['in']} | {'yes' if p['required'] else 'no'} | "
            f"{_cell(p.get('description', ''))} |"
            for p in parameters
        ]
        out.append("")
    body = operation.get("requestBody")
    if body is not None:
        out.append(f"- **Body**: {_schema_name(body['content']['application/json']['schema'])}")
    responses = operation["responses"]
    ((media, content),) = responses["200"]["content"].items()
    answer = _schema_name(content["schema"]) if media == "application/json" else f"`{media}`"
    out.append(f"- **Answer**: {answer}")
    errors = sorted(status for status in responses if status != "200")
    if errors:
        out.append(f"- **Errors**: {', '.join(errors)}")
    out.append("")
    return out


def _schema_name(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        return f"`{schema['$ref'].removeprefix(_SCHEMA_PREFIX)}`"
    if "oneOf" in schema:
        return " or ".join(_schema_name(branch) for branch in schema["oneOf"])
    return "a JSON object"


PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/configuration.md": configuration_page,
    "docs/reference/http.md": http_page,
}
"""Each generated page, by its path from the repository root, and what makes it."""


def main(argv: list[str] | None = None, *, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(prog=_REFRESH, description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for relative, make in PAGES.items():
        path = root / relative
        text = make()
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(relative)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    verb = "stale (run " + _REFRESH + ")" if args.check else "written"
    for relative in stale:
        sys.stderr.write(f"{relative}: {verb}\n")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
