"""The docs' generated pages are what their sources make: every setting has its line, every route its
section, and a setting without a description cannot be documented at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pydantic import Field
from scripts.docs_reference import PAGES, ROOT, _anchor, configuration_page, http_page, main

from cpersona import Settings
from cpersona.edges.http.app import openapi_document

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_committed_page_is_what_the_generator_makes(page: str) -> None:
    committed = (ROOT / page).read_text(encoding="utf-8")
    assert committed == PAGES[page](), f"{page} is stale: run `python -m scripts.docs_reference`"


def test_the_configuration_page_has_a_line_for_every_setting() -> None:
    page = configuration_page()
    for name, field in Settings.model_fields.items():
        line = next(row for row in page.splitlines() if row.startswith(f"| `CPERSONA_{name.upper()}` |"))
        assert field.description is not None
        assert " ".join(field.description.split()) in line


def test_a_setting_without_a_description_is_refused() -> None:
    class Grown(Settings):
        shiny_new_knob: int = 3

    with pytest.raises(ValueError, match="CPERSONA_SHINY_NEW_KNOB has no description"):
        configuration_page(Grown)


def test_a_described_setting_gets_its_type_default_and_meaning() -> None:
    class Grown(Settings):
        shiny_new_knob: int = Field(3, ge=1, description="How shiny")

    line = "| `CPERSONA_SHINY_NEW_KNOB` | `3` | How shiny (integer, at least 1) |"
    assert line in configuration_page(Grown)


def test_the_http_page_has_a_section_for_every_route_of_the_document() -> None:
    document = openapi_document()
    page = http_page(document)
    routes = [(method.upper(), path) for path, item in document["paths"].items() for method in item]
    headings = [line for line in page.splitlines() if line.startswith("## `")]
    assert headings == [f"## `{method} {path}` {{#{_anchor(method, path)}}}" for method, path in routes]


def test_check_mode_names_a_stale_page_and_writing_refreshes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{page}: stale (run python -m scripts.docs_reference)" for page in PAGES
    ]
    assert main([], root=tmp_path) == 0
    assert main(["--check"], root=tmp_path) == 0
    assert (tmp_path / "docs/reference/configuration.md").read_text(encoding="utf-8") == configuration_page()
