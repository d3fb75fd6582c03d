"""Settings from the environment: each knob read, bad values refused with the variable's name."""

from __future__ import annotations

import pytest

from fleet_data.connectors import Settings


def test_environment_knobs_reach_the_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("VDS_API_KEY", "k")
    monkeypatch.setenv("VDS_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("VDS_MAX_RETRIES", "2")
    monkeypatch.setenv("VDS_MAX_RETRY_AFTER", "0")
    monkeypatch.setenv("VDS_TIMEOUT", "0.75")
    settings = Settings.from_env(env_file=tmp_path / "absent.env")
    assert (settings.api_key, settings.base_url) == ("k", "http://127.0.0.1:1")
    assert (settings.retry.max_retries, settings.retry.max_retry_after) == (2, 0)
    assert settings.timeout.read == 0.75 and settings.timeout.connect == 5.0


def test_defaults_without_the_environment(monkeypatch, tmp_path):
    for name in ("VDS_API_KEY", "VDS_BASE_URL", "VDS_MAX_RETRIES", "VDS_MAX_RETRY_AFTER", "VDS_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings.from_env(env_file=tmp_path / "absent.env")
    assert not settings.configured and settings.timeout.read == 30.0


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_timeout_that_cannot_work_is_refused(monkeypatch, tmp_path, value):
    monkeypatch.setenv("VDS_TIMEOUT", value)
    with pytest.raises(ValueError, match="VDS_TIMEOUT"):
        Settings.from_env(env_file=tmp_path / "absent.env")


def test_a_key_alone_means_the_public_service(monkeypatch, tmp_path):
    monkeypatch.setenv("VDS_API_KEY", "k")
    monkeypatch.delenv("VDS_BASE_URL", raising=False)
    assert Settings.from_env(env_file=tmp_path / "absent.env").base_url == "https://api.carsxe.com"
    monkeypatch.setenv("VDS_BASE_URL", "http://127.0.0.1:1")  # VDS_BASE_URL still wins
    assert Settings.from_env(env_file=tmp_path / "absent.env").base_url == "http://127.0.0.1:1"


@pytest.mark.parametrize("name,value", [("VDS_TIMEOUT", "nan"), ("VDS_TIMEOUT", "inf"), ("VDS_MAX_RETRY_AFTER", "nan"),
                                        ("VDS_MAX_RETRY_AFTER", "inf"), ("VDS_MAX_RETRY_AFTER", "-1"),
                                        ("VDS_MAX_RETRIES", "-1"), ("VDS_MAX_RETRIES", "2.5")])
def test_a_number_that_is_not_finite_or_in_range_is_refused(monkeypatch, tmp_path, name, value):
    """A read timeout of nan never fires, and a Retry-After cap of nan lets any wait through: not settings."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        Settings.from_env(env_file=tmp_path / "absent.env")


def test_dotenv_values_are_checked_too_and_the_environment_wins(monkeypatch, tmp_path):
    for name in ("VDS_API_KEY", "VDS_BASE_URL", "VDS_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    env = tmp_path / ".env"
    env.write_text("VDS_API_KEY=from_file\nVDS_TIMEOUT=nan\nOTHER=x\n")
    with pytest.raises(ValueError, match="VDS_TIMEOUT"):
        Settings.from_env(env_file=env)
    monkeypatch.setenv("VDS_TIMEOUT", "2")
    monkeypatch.setenv("VDS_API_KEY", "")  # empty: unset, so the file's
    settings = Settings.from_env(env_file=env)
    assert (settings.api_key, settings.timeout.read) == ("from_file", 2.0)
