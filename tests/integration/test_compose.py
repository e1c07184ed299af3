"""compose.yaml and the Dockerfile, checked for structure. There is no Docker on this machine, so no test
here starts a container.

What is held: Redis 8 with the modules cpersona needs (its healthcheck asks for them) and an AOF fsynced
before each reply; Qdrant; the workers built from the Dockerfile (the package installed at build time,
not at every start) and pointed at both engines by the settings' own variable names, started only once
both engines are healthy, with a healthcheck of their own; and every setting named is a real one.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpersona.settings import PREFIX, Settings
from cpersona.stores.redis.binaries import redis_binary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    # Continuation lines joined, comments dropped: one instruction per entry.
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose["services"]
    assert set(services) == {"redis", "qdrant", "cpersona"}
    return services  # type: ignore[no-any-return]


def _embedded_major() -> str:
    out = subprocess.run(
        [str(redis_binary()), "--version"], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"v=(\d+)\.", out)
    assert found, out
    return found.group(1)


def test_redis_is_the_embedded_major_with_its_modules_and_durable(compose: dict[str, Any]) -> None:
    redis = _services(compose)["redis"]
    name, tag = redis["image"].split(":")
    assert name == "redis"
    assert tag.split(".")[0] == _embedded_major()
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "always"
    test = " ".join(redis["healthcheck"]["test"])
    assert "MODULE LIST" in test
    assert "grep -q search" in test
    assert "grep -q ReJSON" in test


def test_qdrant_runs_with_a_volume_and_a_healthcheck(compose: dict[str, Any]) -> None:
    qdrant = _services(compose)["qdrant"]
    assert qdrant["image"].startswith("qdrant/qdrant:v")
    assert any(volume.endswith(":/qdrant/storage") for volume in qdrant["volumes"])
    assert "6333" in " ".join(qdrant["healthcheck"]["test"])


def test_the_workers_come_from_a_built_image_over_both_engines(compose: dict[str, Any]) -> None:
    services = _services(compose)
    worker = services["cpersona"]
    assert worker["build"] == "."
    # No install at start: the command is the image's own entry point, serving.
    assert worker["command"][0] == "serve"
    assert "pip" not in " ".join(worker["command"])
    env = worker["environment"]
    assert env["CPERSONA_REDIS_URL"].startswith("redis://redis:")
    assert env["CPERSONA_QDRANT_URL"].startswith("http://qdrant:6333")
    assert re.fullmatch(r"\$\{CPERSONA_WORKERS:-[2-9]\d*\}", env["CPERSONA_WORKERS"])
    assert worker["depends_on"] == {
        "redis": {"condition": "service_healthy"},
        "qdrant": {"condition": "service_healthy"},
    }
    assert "/health" in " ".join(worker["healthcheck"]["test"])
    assert set(compose["volumes"]) >= {"redis-data", "qdrant-data", "cpersona-data"}


def test_every_variable_named_is_a_setting(compose: dict[str, Any], dockerfile: list[str]) -> None:
    named = set(_services(compose)["cpersona"]["environment"])
    named |= {
        word.split("=")[0] for line in dockerfile if line.startswith("ENV ") for word in line.split()[1:]
    }
    settings = {PREFIX + field.upper() for field in Settings.model_fields}
    assert {name for name in named if name.startswith(PREFIX)} <= settings
    # The worker count is taken as the settings take it, above 1 with both shared engines set.
    env = {"CPERSONA_REDIS_URL": "redis://redis:6379/0", "CPERSONA_QDRANT_URL": "http://qdrant:6333"}
    assert Settings.from_env({**env, "CPERSONA_WORKERS": "2"}).workers == 2


def test_the_image_installs_the_package_at_build_time(dockerfile: list[str]) -> None:
    stages = [line for line in dockerfile if line.startswith("FROM ")]
    assert all(line.split()[1].startswith("python:3.11") for line in stages)
    runs = " ".join(line for line in dockerfile if line.startswith("RUN "))
    assert "pip wheel" in runs
    assert "pip install" in runs
    # What the build copies is what the wheel needs: the metadata, the package and the recall policies.
    copies = [line.split()[1:-1] for line in dockerfile if line.startswith("COPY ") and "--from" not in line]
    assert {source for sources in copies for source in sources} == {
        "pyproject.toml",
        "README.md",
        "src",
        "stages",
    }
    assert any(line.startswith("USER ") and "root" not in line for line in dockerfile)
    assert dockerfile[-2:] == ['ENTRYPOINT ["cpersona"]', 'CMD ["serve"]']


def test_the_build_context_keeps_what_the_image_copies() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "tests"} <= ignored
    assert not ignored & {"src", "stages", "pyproject.toml", "README.md"}
