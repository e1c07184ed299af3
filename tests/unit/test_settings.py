"""Settings are read from CPERSONA_* once, and a bad value is refused with the variable's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpersona import InvalidSetting, Settings


def test_defaults_without_environment() -> None:
    settings = Settings.from_env({})
    assert settings.redis_url is None
    assert settings.embedded_redis
    assert settings.port == 8077
    assert settings.host == "127.0.0.1"
    assert settings.embedding_mode == "onnx"


def test_values_are_parsed_by_type() -> None:
    settings = Settings.from_env(
        {
            "CPERSONA_PORT": "9000",
            "CPERSONA_DATA_DIR": "/tmp/x",
            "CPERSONA_EMBEDDING_MODE": "NONE",
            "CPERSONA_REDIS_TIMEOUT_SECS": "2.5",
            "CPERSONA_REDIS_URL": "redis://h:1",
        }
    )
    assert settings.port == 9000
    assert settings.data_dir == Path("/tmp/x")
    assert settings.embedding_mode == "none"
    assert settings.redis_timeout_secs == 2.5
    assert not settings.embedded_redis


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"CPERSONA_PORT": "eighty"}, "CPERSONA_PORT"),
        ({"CPERSONA_PORT": "70000"}, "CPERSONA_PORT"),
        ({"CPERSONA_EMBEDDING_MODE": "magic"}, "CPERSONA_EMBEDDING_MODE"),
        ({"CPERSONA_EMBEDDING_MODE": "http"}, "CPERSONA_EMBEDDING_URL"),
        ({"CPERSONA_REDIS_TIMEOUT_SECS": "0"}, "CPERSONA_REDIS_TIMEOUT_SECS"),
        ({"CPERSONA_KEY_PREFIX": "a:b"}, "CPERSONA_KEY_PREFIX"),
        ({"CPERSONA_FUTURE_TIMESTAMP_MODE": "maybe"}, "CPERSONA_FUTURE_TIMESTAMP_MODE"),
        ({"CPERSONA_MAX_BODY_BYTES": "0"}, "CPERSONA_MAX_BODY_BYTES"),
        ({"CPERSONA_MAX_BODY_BYTES": "8MiB"}, "CPERSONA_MAX_BODY_BYTES"),
        ({"CPERSONA_HTTP_HEADER_TIMEOUT_SECS": "0"}, "CPERSONA_HTTP_HEADER_TIMEOUT_SECS"),
        ({"CPERSONA_HTTP_BODY_TIMEOUT_SECS": "-1"}, "CPERSONA_HTTP_BODY_TIMEOUT_SECS"),
        ({"CPERSONA_HTTP_MAX_CONNECTIONS": "0"}, "CPERSONA_HTTP_MAX_CONNECTIONS"),
        ({"CPERSONA_HTTP_MAX_CONNECTIONS": "lots"}, "CPERSONA_HTTP_MAX_CONNECTIONS"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(InvalidSetting) as err:
        Settings.from_env(env)
    assert err.value.name == name


def test_overrides_must_be_settings() -> None:
    with pytest.raises(InvalidSetting):
        Settings.from_env({}, colour="red")


def test_a_misspelled_variable_is_reported_not_ignored() -> None:
    with pytest.raises(InvalidSetting) as err:
        Settings.from_env({"CPERSONA_REDIS_ULR": "redis://h:1"})
    assert err.value.name == "CPERSONA_REDIS_ULR"
    assert "CPERSONA_REDIS_URL" in str(err.value)
    # Other programs' variables, and the test suite's own, are no settings and no typos.
    assert Settings.from_env({"PATH": "/bin", "CPERSONA_TEST_REDIS_URL": "redis://h:1"}).redis_url is None


def test_empty_values_are_unset() -> None:
    assert Settings.from_env({"CPERSONA_PORT": ""}).port == 8077


def test_settings_built_in_code_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPERSONA_PORT", "9999")
    assert Settings().port == 8077
    assert Settings.from_env().port == 9999


def test_settings_are_frozen_and_copies_are_validated() -> None:
    settings = Settings.from_env({})
    with pytest.raises(ValueError, match="frozen"):
        settings.port = 1
    assert settings.with_(port=9000).port == 9000
    assert settings.port == 8077
    with pytest.raises(InvalidSetting) as err:
        settings.with_(port=-1)
    assert err.value.name == "CPERSONA_PORT"
    with pytest.raises(InvalidSetting) as err:
        settings.with_(colour="red")
    assert err.value.name == "colour"


def test_the_body_limit_is_a_setting_near_8_mib() -> None:
    assert Settings.from_env({}).max_body_bytes == 8 * 1024 * 1024
    assert Settings.from_env({"CPERSONA_MAX_BODY_BYTES": "1024"}).max_body_bytes == 1024


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0", "must be more than 0"),
        ("-24", "must be more than 0"),
        ("a day", "must be a number"),
        ("nan", "must be a finite number"),
        ("inf", "must be a finite number"),
    ],
)
def test_a_bad_fidelity_time_scale_is_named_with_what_it_must_be(value: str, problem: str) -> None:
    with pytest.raises(InvalidSetting) as err:
        Settings.from_env({"CPERSONA_FIDELITY_STABILITY_HOURS": value})
    assert err.value.name == "CPERSONA_FIDELITY_STABILITY_HOURS"
    assert problem in str(err.value)


def test_the_fidelity_time_scale_is_read_in_hours_and_documented() -> None:
    assert Settings.from_env({}).fidelity_stability_hours == 24.0
    assert Settings.from_env({"CPERSONA_FIDELITY_STABILITY_HOURS": "0.5"}).fidelity_stability_hours == 0.5
    description = Settings.model_fields["fidelity_stability_hours"].description
    assert description is not None
    assert "hours" in description
