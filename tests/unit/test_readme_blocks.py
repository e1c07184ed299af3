"""How the README walk-through's test reads the README and compares output (``tests/readme_blocks.py``)."""

from __future__ import annotations

from readme_blocks import Block, Step, blocks, normalized, section, shown_matches, steps

TEXT = """# title

## One

```console title="second terminal"
$ echo one
one
```

### Inside one

```text
## not a heading inside a fence
```

## Two

after
"""


def test_a_section_runs_to_the_next_heading_of_its_level_not_to_one_inside_a_fence() -> None:
    one = section(TEXT, "## One")
    assert "### Inside one" in one
    assert "## not a heading inside a fence" in one
    assert "after" not in one
    assert section(TEXT, "## Two").strip() == "after"
    assert section(TEXT, "## Three") == ""


def test_blocks_keep_their_language_and_title() -> None:
    found = blocks(section(TEXT, "## One"))
    assert found[0] == Block("console", 'title="second terminal"', ("$ echo one", "one"))
    assert found[1].lang == "text"


def test_a_command_runs_on_over_an_open_quote_and_a_trailing_backslash() -> None:
    block = Block(
        "console",
        "",
        (
            '$ curl -s x -d \'{"a": [',
            '    {"b": 1}]}\'',
            '{"ok":true}',
            "$ curl -s y \\",
            "    -d '{}'",
            "$ true",
        ),
    )
    assert steps(block) == [
        Step('curl -s x -d \'{"a": [\n    {"b": 1}]}\'', ('{"ok":true}',)),
        Step("curl -s y \\\n    -d '{}'", ()),
        Step("true", ()),
    ]


def test_shown_output_must_be_printed_line_for_line() -> None:
    assert shown_matches(["a", "b"], ["a", "b"])
    assert not shown_matches(["a", "b"], ["a", "c"])
    assert not shown_matches(["a", "b"], ["a", "b", "c"])
    assert not shown_matches(["a", "b", "c"], ["a", "b"])
    assert shown_matches(["a", "b"], ["a", "b", "c"], open_end=True)
    assert not shown_matches(["a", "b"], ["x", "a", "b"], open_end=True)


def test_an_ellipsis_stands_for_any_text_in_a_line_and_any_lines_alone() -> None:
    assert shown_matches(['{"ok":true,…,"count":2,…}'], ['{"ok":true,"mode":"rrf","count":2,"rows":[]}'])
    assert not shown_matches(['{"ok":true,…,"count":2,…}'], ['{"ok":true,"mode":"rrf","count":3,"rows":[]}'])
    assert shown_matches(["…", "b", "…", "e"], ["a", "b", "c", "d", "e"])
    assert shown_matches(["a", "…", "b"], ["a", "b"])
    assert not shown_matches(["…", "b", "…", "e"], ["a", "c", "d", "e"])
    assert shown_matches(["(x.y)"], ["(x.y)"])
    assert not shown_matches(["(x.y)"], ["(xzy)"])  # the rest is literal, not a pattern


def test_ids_and_clock_times_are_made_alike_but_stored_times_are_kept() -> None:
    printed = normalized(
        "── recall 17:13:10  agent a\n"
        "  1  mem:01a2517e-a6ae-74d6-88b6-696f73f55172  2026-08-14T09:00:00.000000Z\n"
        "  [mem:01a2517e-a6ae-749d-9814-3685a5a68f17 0.7011]"
    )
    shown = normalized(
        (
            "── recall 09:00:01  agent a",
            "  1  mem:0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee  2026-08-14T09:00:00.000000Z",
            "  [mem:01a2517e-… 0.7011]",
        )
    )
    assert shown_matches(shown, printed)
    other_day = normalized(("  1  mem:0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee  2026-08-15T09:00:00.000000Z",))
    assert not shown_matches(other_day, printed[1:2])


def test_the_port_and_data_dir_of_a_run_become_the_readmes() -> None:
    printed = normalized(
        "serving http://127.0.0.1:40123 from /tmp/x/data", {":40123": ":8077", "/tmp/x/data": "~"}
    )
    assert printed == ["serving http://127.0.0.1:8077 from ~"]


def test_a_traces_arms_compare_in_name_order() -> None:
    finished = [
        "   request  limit 3",
        "   arms     vector_near 2  [x]",
        "            block 4  [y]",
        "            episode_fts 0",
        "   fusion   2 candidate(s)",
    ]
    assert normalized("\n".join(finished)) == [
        "   request  limit 3",
        "   arms     block 4  [y]",
        "            episode_fts 0",
        "            vector_near 2  [x]",
        "   fusion   2 candidate(s)",
    ]
