"""Policy files: the five shipped policies, ``extends`` chains, the stage ``chain`` each names, the
``[cue]`` table and refused files.

Refused files are written into a temporary directory next to a copy of the real ``single-pass-v0``, so
every case checks the loader against the schema the engine actually runs.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from cpersona import InvalidSetting
from cpersona.model.policy import NO_OVERLAY, PolicyOverlay
from cpersona.recall.policy import CuePolicy, Policy, load_policies, policy_dir
from cpersona.recall.stages.chain import build_chain

BASE = policy_dir() / "single-pass-v0.toml"

CUE_V0 = CuePolicy(
    margins={"sure": 0.0, "likely": 0.5, "vague": 1.0},
    lift={"sure": 3, "likely": 2, "vague": 1},
    seats={"sure": 1, "likely": 1, "vague": 1},
    seat_cut_rows=False,
    recent_only_hours=0.0,
    search_episodes=False,
    depth=0,
    merge_k=61,
    vector_floor_factor=0.5,
    revisions=1,
)
CUE_V0_1 = CUE_V0.model_copy(update={"recent_only_hours": 24.0})
CUE_V0_2 = CUE_V0_1.model_copy(update={"search_episodes": True})
CUE_V0_3 = CUE_V0_2.model_copy(
    update={"depth": 50, "seats": {"sure": 3, "likely": 2, "vague": 1}, "seat_cut_rows": True}
)

CUE_TABLE = """
[cue]
margins = { sure = 0.0, likely = 0.5, vague = 1.0 }
lift = { sure = 3, likely = 2, vague = 1 }
seats = { sure = 1, likely = 1, vague = 1 }
seat_cut_rows = false
recent_only_hours = 0
search_episodes = false
depth = 0
merge_k = 61
vector_floor_factor = 0.5
revisions = 1
"""


def folder(tmp_path: Path, **files: str) -> Path:
    """A policy directory with the real single-pass-v0 and the given files (stem -> TOML text)."""
    shutil.copy(BASE, tmp_path / BASE.name)
    for stem, text in files.items():
        (tmp_path / f"{stem}.toml").write_text(text, encoding="utf-8")
    return tmp_path


def refused(directory: Path) -> InvalidSetting:
    with pytest.raises(InvalidSetting) as err:
        load_policies(directory)
    return err.value


# ------------------------------------------------------------------------------------ shipped policies


SHIPPED = (
    "single-pass-v0",
    "single-pass-v1",
    "single-pass-v2",
    "cued-v0",
    "cued-v0.1",
    "cued-v0.2",
    "cued-v0.3",
    "cued-v0.4",
    "cued-v0.5",
)


def test_the_shipped_policies_load_with_their_values() -> None:
    policies = load_policies()
    assert set(policies) == set(SHIPPED)
    assert policies["single-pass-v0"].cue is None
    assert policies["single-pass-v1"].cue is None
    assert policies["cued-v0"].cue == CUE_V0
    assert policies["cued-v0.1"].cue == CUE_V0_1
    assert policies["cued-v0.2"].cue == CUE_V0_2
    assert policies["cued-v0.3"].cue == CUE_V0_3
    assert policies["cued-v0.4"].cue == CUE_V0_3
    assert policies["cued-v0.5"].cue == CUE_V0_3
    # The seat floor is the whole of what single-pass-v1 and cued-v0.4 change.
    floored = {name for name, policy in policies.items() if policy.seats.floor}
    assert floored == {"single-pass-v1", "cued-v0.4", "single-pass-v2", "cued-v0.5"}
    v0, v1 = policies["single-pass-v0"], policies["single-pass-v1"]
    assert v1.model_copy(update={"name": v0.name, "seats": v0.seats}) == v0
    assert (
        policies["cued-v0.4"].model_copy(update={"name": "cued-v0.3", "seats": v0.seats})
        == policies["cued-v0.3"]
    )
    single = ("fuse", "score", "gate", "autocut", "count", "seats")
    before = ("fuse", "score", "gate", "autocut", "cue_before_count", "count", "seats")
    after = ("fuse", "score", "gate", "autocut", "count", "cue_after_count", "seats")
    assert policies["single-pass-v0"].chain == single
    assert policies["single-pass-v1"].chain == single
    assert policies["single-pass-v2"].chain == single
    assert policies["cued-v0"].chain == before
    for name in ("cued-v0.1", "cued-v0.2", "cued-v0.3", "cued-v0.4", "cued-v0.5"):
        assert policies[name].chain == after


def test_cued_policies_run_the_single_pass_recall_outside_the_cue() -> None:
    policies = load_policies()
    cued = {"cued-v0": "single-pass-v0", "cued-v0.1": "single-pass-v0", "cued-v0.2": "single-pass-v0"}
    cued |= {"cued-v0.3": "single-pass-v0", "cued-v0.4": "single-pass-v1", "cued-v0.5": "single-pass-v2"}
    for name, single_name in cued.items():
        single = policies[single_name]
        assert policies[name].name == name
        # The chain differs only by the one cue move it adds.
        cue_free = tuple(stage for stage in policies[name].chain if not stage.startswith("cue_"))
        assert cue_free == single.chain
        assert len(policies[name].chain) == len(single.chain) + 1
        same = policies[name].model_copy(update={"name": single.name, "cue": None, "chain": single.chain})
        assert same == single


def test_every_shipped_file_says_what_it_extends_and_names_its_own_stem() -> None:
    chain = {"cued-v0": "single-pass-v0", "cued-v0.1": "cued-v0", "cued-v0.2": "cued-v0.1"}
    chain |= {"cued-v0.3": "cued-v0.2", "cued-v0.4": "cued-v0.3", "single-pass-v1": "single-pass-v0"}
    chain |= {"cued-v0.5": "cued-v0.4", "single-pass-v2": "single-pass-v1"}
    for stem, base in chain.items():
        raw = tomllib.loads((policy_dir() / f"{stem}.toml").read_text(encoding="utf-8"))
        assert (raw["name"], raw["extends"]) == (stem, base)


def test_the_wheel_ships_the_policy_directory() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    include = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include["stages"] == "cpersona/stages"


# ----------------------------------------------------------------------------------------------- extends


def test_a_child_gives_only_what_it_changes(tmp_path: Path) -> None:
    d = folder(
        tmp_path,
        base=f'name = "base"\nextends = "single-pass-v0"\n{CUE_TABLE}',
        child='name = "child"\nextends = "base"\n[cue]\nlift = { likely = 5 }\n[limit]\ndefault = 7\n',
    )
    policies = load_policies(d)
    child, base = policies["child"], policies["base"]
    assert child.cue == CUE_V0.model_copy(update={"lift": {"sure": 3, "likely": 5, "vague": 1}})
    assert (child.limit.default, child.limit.max) == (7, base.limit.max)
    assert base.cue == CUE_V0  # the base is not changed by the file built on it
    assert base.limit.default == 10


def test_a_file_that_extends_nothing_still_needs_every_key(tmp_path: Path) -> None:
    d = folder(tmp_path, lone='name = "lone"\n[limit]\ndefault = 7\nmax = 9\n')
    err = refused(d)
    assert err.name == "policy file lone.toml"
    # Every entry missing is named at once, in the schema's order; the name and [limit] are there.
    missing = ["scoring", "chain", "depth", "vector", "fusion", "gate", "autocut", "score_adjust"]
    missing += ["seats", "blocks", "exclude", "render"]
    assert err.problem == "; ".join(f"{key}: Field required" for key in missing)


def test_the_name_is_never_inherited(tmp_path: Path) -> None:
    err = refused(folder(tmp_path, child='extends = "single-pass-v0"\n'))
    assert (err.name, err.problem) == ("policy file child.toml", "name: Field required")


def test_a_child_must_name_itself_after_its_stem(tmp_path: Path) -> None:
    err = refused(folder(tmp_path, **{"cued-v9.1": 'name = "cued-v9"\nextends = "single-pass-v0"\n'}))
    assert err.name == "policy file cued-v9.1.toml"
    assert "cued-v9" in err.problem
    assert "cued-v9.1" in load_policies(
        folder(tmp_path, **{"cued-v9.1": 'name = "cued-v9.1"\nextends = "single-pass-v0"\n'})
    )


def test_an_unknown_base_is_refused_naming_the_file(tmp_path: Path) -> None:
    err = refused(folder(tmp_path, child='name = "child"\nextends = "single-pass-v9"\n'))
    assert err.name == "policy file child.toml"
    assert "single-pass-v9" in err.problem


def test_extends_must_be_a_name(tmp_path: Path) -> None:
    err = refused(folder(tmp_path, child='name = "child"\nextends = ["single-pass-v0"]\n'))
    assert err.name == "policy file child.toml"
    assert "extends" in err.problem


@pytest.mark.parametrize(
    "files",
    [
        {"a": 'name = "a"\nextends = "a"\n'},
        {"a": 'name = "a"\nextends = "b"\n', "b": 'name = "b"\nextends = "a"\n'},
        {
            "a": 'name = "a"\nextends = "b"\n',
            "b": 'name = "b"\nextends = "c"\n',
            "c": 'name = "c"\nextends = "b"\n',
        },
    ],
)
def test_a_cycle_is_refused_naming_a_file_in_it(tmp_path: Path, files: dict[str, str]) -> None:
    err = refused(folder(tmp_path, **files))
    assert err.name.removeprefix("policy file ").removesuffix(".toml") in files
    assert "extends itself" in err.problem


def test_a_fault_in_a_base_is_reported_against_the_base(tmp_path: Path) -> None:
    # "a-child" sorts before "z-base", so only building bases first names the right file.
    d = folder(
        tmp_path,
        **{
            "a-child": 'name = "a-child"\nextends = "z-base"\n',
            "z-base": 'name = "z-base"\nextends = "single-pass-v0"\n[limit]\ndefault = "ten"\n',
        },
    )
    err = refused(d)
    assert (err.name, err.problem) == (
        "policy file z-base.toml",
        "limit.default: Input should be a valid integer, got 'ten'",
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[limit]\nlimit = 3\n", "limit.limit: Extra inputs are not permitted"),
        ("[limit]\ndefault = 1.5\n", "limit.default: Input should be a valid integer, got 1.5"),
        (
            "[vector]\nmin_similarity = nan\n",
            "vector.min_similarity: Input should be a finite number, got nan",
        ),
        (
            "[gate]\nprecision_beta = { strict = true }\n",
            "gate.precision_beta.strict: Input should be a valid number, got True",
        ),
        ("limit = 3\n", "limit: Input should be a valid dictionary or instance of LimitPolicy, got 3"),
        ("colour = 3\n", "colour: Extra inputs are not permitted"),
        ("cue = 3\n", "cue: Input should be a valid dictionary or instance of CuePolicy, got 3"),
    ],
)
def test_the_merged_result_is_checked_like_a_lone_file(tmp_path: Path, text: str, problem: str) -> None:
    err = refused(folder(tmp_path, child=f'name = "child"\nextends = "single-pass-v0"\n{text}'))
    assert (err.name, err.problem) == ("policy file child.toml", problem)


# ---------------------------------------------------------------------------------------- the cue table


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("lift = { certain = 4 }", "cue.lift.certain: Extra inputs are not permitted"),
        (
            "margins = { sure = -0.5 }",
            "cue.margins.sure: Input should be greater than or equal to 0, got -0.5",
        ),
        ("seats = { vague = -1 }", "cue.seats.vague: Input should be greater than or equal to 0, got -1"),
        ("lift = { sure = 1.5 }", "cue.lift.sure: Input should be a valid integer, got 1.5"),
        ("seats = { sure = true }", "cue.seats.sure: Input should be a valid integer, got True"),
        ("margins = { likely = inf }", "cue.margins.likely: Input should be a finite number, got inf"),
        ("lift = 3", "cue.lift: Input should be a valid dictionary, got 3"),
        # Where the move runs is said by the chain now, so a leftover key is refused, not ignored.
        ('move = "before_count"', "cue.move: Extra inputs are not permitted"),
        (
            "recent_only_hours = -1",
            "cue.recent_only_hours: Input should be greater than or equal to 0, got -1",
        ),
        ("depth = -5", "cue.depth: Input should be greater than or equal to 0, got -5"),
        ("merge_k = 0", "cue.merge_k: Input should be greater than 0, got 0"),
        ("revisions = 1.0", "cue.revisions: Input should be a valid integer, got 1.0"),
        ("search_episodes = 1", "cue.search_episodes: Input should be a valid boolean, got 1"),
        ("spread = 2", "cue.spread: Extra inputs are not permitted"),
    ],
)
def test_a_bad_cue_key_is_refused_naming_file_and_key(tmp_path: Path, override: str, problem: str) -> None:
    d = folder(
        tmp_path,
        base=f'name = "base"\nextends = "single-pass-v0"\n{CUE_TABLE}',
        child=f'name = "child"\nextends = "base"\n[cue]\n{override}\n',
    )
    err = refused(d)
    assert (err.name, err.problem) == ("policy file child.toml", problem)


@pytest.mark.parametrize("key", ["margins", "lift", "seats", "revisions", "merge_k"])
def test_every_cue_key_is_required(tmp_path: Path, key: str) -> None:
    table = "\n".join(line for line in CUE_TABLE.splitlines() if not line.startswith(f"{key} "))
    err = refused(folder(tmp_path, child=f'name = "child"\nextends = "single-pass-v0"\n{table}\n'))
    assert (err.name, err.problem) == ("policy file child.toml", f"cue.{key}: Field required")


@pytest.mark.parametrize("table", ["margins", "lift", "seats"])
def test_a_confidence_table_needs_all_three_words(tmp_path: Path, table: str) -> None:
    lines = [
        f"{table} = {{ sure = 1, likely = 1 }}" if line.startswith(f"{table} ") else line
        for line in CUE_TABLE.splitlines()
    ]
    body = "\n".join(lines)
    err = refused(folder(tmp_path, child=f'name = "child"\nextends = "single-pass-v0"\n{body}\n'))
    assert (err.name, err.problem) == ("policy file child.toml", f"cue.{table}.vague: Field required")


# ----------------------------------------------------------------------------------------------- chain

CUED_CHAIN = 'chain = ["fuse", "score", "gate", "autocut", "cue_before_count", "count", "seats"]'


def test_a_child_inherits_its_bases_chain_unless_it_names_its_own(tmp_path: Path) -> None:
    after = 'chain = ["fuse", "score", "gate", "autocut", "count", "cue_after_count", "seats"]'
    d = folder(
        tmp_path,
        base=f'name = "base"\nextends = "single-pass-v0"\n{CUED_CHAIN}\n{CUE_TABLE}',
        same='name = "same"\nextends = "base"\n',
        moved=f'name = "moved"\nextends = "base"\n{after}\n',
    )
    policies = load_policies(d)
    assert policies["same"].chain == policies["base"].chain
    assert policies["base"].chain[4] == "cue_before_count"
    # A list is replaced whole, never merged item by item.
    assert policies["moved"].chain == (
        "fuse",
        "score",
        "gate",
        "autocut",
        "count",
        "cue_after_count",
        "seats",
    )


def test_a_file_that_extends_nothing_must_name_its_chain(tmp_path: Path) -> None:
    base = tomllib.loads(BASE.read_text(encoding="utf-8"))
    text = BASE.read_text(encoding="utf-8").replace('name = "single-pass-v0"', 'name = "lone"')
    lines = [line for line in text.splitlines() if not line.startswith("chain = ")]
    assert "chain" in base
    err = refused(folder(tmp_path, lone="\n".join(lines) + "\n"))
    assert (err.name, err.problem) == ("policy file lone.toml", "chain: Field required")


@pytest.mark.parametrize(
    ("chain", "problem"),
    [
        ('"fuse"', "chain: Input should be a valid tuple, got 'fuse'"),
        ('["fuse", 3]', "chain[1]: Input should be a valid string, got 3"),
        (
            '["fuse", "score", "rerank", "gate", "autocut", "count", "seats"]',
            "chain[2] names an unknown stage 'rerank' (the stages: fuse, score, gate, autocut, "
            "cue_before_count, count, cue_after_count, seats)",
        ),
        (
            '["fuse", "score", "score", "gate", "autocut", "count", "seats"]',
            "chain[2] names score a second time",
        ),
        (
            '["fuse", "score", "gate", "count", "autocut", "seats"]',
            "chain is mis-wired: count gives Counted but autocut takes Gated",
        ),
        (
            '["fuse", "gate", "autocut", "count"]',
            "chain is mis-wired: the chain gives Seated but count gives Counted",
        ),
        (
            '["score", "gate", "autocut", "count", "seats"]',
            "chain is mis-wired: the chain takes Retrieved but score takes Ranked",
        ),
        ("[]", "chain is mis-wired: a chain needs at least one stage"),
        # The cue moves read [cue], which single-pass-v0 (the base here) does not have.
        (
            '["fuse", "score", "gate", "autocut", "cue_before_count", "count", "seats"]',
            "chain[4] names cue_before_count, which needs a [cue] table",
        ),
        (
            '["fuse", "score", "gate", "autocut", "count", "cue_after_count", "seats"]',
            "chain[5] names cue_after_count, which needs a [cue] table",
        ),
    ],
)
def test_a_bad_chain_is_refused_naming_file_and_entry(tmp_path: Path, chain: str, problem: str) -> None:
    err = refused(folder(tmp_path, child=f'name = "child"\nextends = "single-pass-v0"\nchain = {chain}\n'))
    assert (err.name, err.problem) == ("policy file child.toml", problem)


@pytest.mark.parametrize(
    ("chain", "problem"),
    [
        (
            '["fuse", "score", "gate", "autocut", "cue_after_count", "count", "seats"]',
            "chain is mis-wired: autocut gives Gated but cue_after_count takes Counted",
        ),
        (
            '["fuse", "score", "gate", "autocut", "count", "cue_before_count", "seats"]',
            "chain is mis-wired: count gives Counted but cue_before_count takes Gated",
        ),
    ],
)
def test_a_cue_move_on_the_wrong_side_of_the_count_is_refused(
    tmp_path: Path, chain: str, problem: str
) -> None:
    text = f'name = "child"\nextends = "single-pass-v0"\nchain = {chain}\n{CUE_TABLE}'
    err = refused(folder(tmp_path, child=text))
    assert (err.name, err.problem) == ("policy file child.toml", problem)


def test_a_chain_with_both_cue_moves_is_refused(tmp_path: Path) -> None:
    # Each move lifts a row by at most L places; two in one chain could lift it by 2L.
    chain = '["fuse", "score", "gate", "autocut", "cue_before_count", "count", "cue_after_count", "seats"]'
    text = f'name = "child"\nextends = "single-pass-v0"\nchain = {chain}\n{CUE_TABLE}'
    err = refused(folder(tmp_path, child=text))
    assert (err.name, err.problem) == (
        "policy file child.toml",
        "chain names both cue_before_count and cue_after_count: a recall moves rows once",
    )


def test_a_policy_with_a_cue_may_list_no_cue_move(tmp_path: Path) -> None:
    # The cue arm and its seats still run; the rows are never moved.
    d = folder(tmp_path, still=f'name = "still"\nextends = "single-pass-v0"\n{CUE_TABLE}')
    policy = load_policies(d)["still"]
    assert policy.cue == CUE_V0
    assert policy.chain == ("fuse", "score", "gate", "autocut", "count", "seats")


def test_a_fault_in_a_bases_chain_is_reported_against_the_base(tmp_path: Path) -> None:
    d = folder(
        tmp_path,
        **{
            "a-child": f'name = "a-child"\nextends = "z-base"\n{CUE_TABLE}',
            "z-base": f'name = "z-base"\nextends = "single-pass-v0"\n{CUED_CHAIN}\n',
        },
    )
    err = refused(d)
    assert (err.name, err.problem) == (
        "policy file z-base.toml",
        "chain[4] names cue_before_count, which needs a [cue] table",
    )


# ------------------------------------------------------------------------------------------ the overlay


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "[seats]\nkeyword = 1\n",
            "seats.keyword: Value error, is set by a recall's overlay, never by a policy file, got 1",
        ),
        (
            "[seats]\nextra_block = 2\n",
            "seats.extra_block: Value error, is set by a recall's overlay, never by a policy file, got 2",
        ),
        (
            "[depth]\nplaces = 8\n",
            "depth.places: Value error, is set by a recall's overlay, never by a policy file, got 8",
        ),
    ],
)
def test_a_file_cannot_set_what_an_overlay_sets(tmp_path: Path, text: str, problem: str) -> None:
    err = refused(folder(tmp_path, child=f'name = "child"\nextends = "single-pass-v0"\n{text}'))
    assert (err.name, err.problem) == ("policy file child.toml", problem)


def test_an_overlay_changes_its_numbers_of_the_policy_and_nothing_else() -> None:
    policy = load_policies()["single-pass-v1"]
    assert NO_OVERLAY.over(policy) is policy
    over = PolicyOverlay(keyword_seats=9, extra_block_seats=2, depth_places=8).over(policy)
    assert (over.seats.keyword, over.seats.extra_block, over.depth.places) == (9, 2, 8)
    assert over.model_copy(update={"seats": policy.seats, "depth": policy.depth}) == policy
    # What a policy dumps is what its file says: the overlay's numbers are not among its values.
    assert TypeAdapter(Policy).dump_python(over) == TypeAdapter(Policy).dump_python(policy)
    assert (policy.seats.keyword, policy.seats.extra_block, policy.depth.places) == (0, 0, 0)


# ------------------------------------------------------------------------------------ what they load to

SHIPPED_VALUES = Path(__file__).parents[1] / "golden" / "policy-values.json"


def shipped_values() -> str:
    """Every shipped policy's values and the stages of the chain built from it, as JSON text."""
    built = {}
    for name, policy in sorted(load_policies().items()):
        values = TypeAdapter(Policy).dump_python(policy, mode="json")
        built[name] = {"stages": [stage.name for stage in build_chain(policy).stages], "values": values}
    return json.dumps(built, indent=2) + "\n"


def test_every_shipped_policy_loads_to_the_values_and_chain_it_always_had() -> None:
    # The JSON text tells 24 from 24.0, so an integer read where a number was (or back) shows here too.
    assert shipped_values() == SHIPPED_VALUES.read_text(encoding="utf-8")
