"""The key check (connectors/keycheck.py) against the sandbox over a real socket: one free call, whose answer
says whether the service refuses the key; anything else is no verdict, and the key never leaves the request."""

from __future__ import annotations

import socket

import pytest

from fleet_data.connectors import Settings
from fleet_data.connectors.keycheck import check_key
from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig(journal=True)) as served:
        yield served


def test_a_usable_key_gets_a_free_validation_answer(sandbox):
    check = check_key(Settings(api_key="keycheck_good_1", base_url=sandbox.url))
    assert (check.status, check.refused) == (400, None)
    assert check.error == "KeyAccepted"  # as the call ledger names it: not a failed call
    assert sandbox.count(key="keycheck_good_1") == 1 and sandbox.units("keycheck_good_1") == 0


@pytest.mark.parametrize("key,status,words", [
    ("test_unknown", 401, "not found"),
    ("test_inactive", 401, "not active"),
    ("test_blocked", 403, "blocked"),
])
def test_a_refused_key_is_said_as_a_run_would_say_it(sandbox, key, status, words):
    check = check_key(Settings(api_key=key, base_url=sandbox.url))
    assert check.status == status and check.refused and check.refused.startswith(f"{status} "), check
    assert words in check.refused.lower()
    assert key not in check.refused and check.error in ("AuthenticationError", "KeyBlockedError")


def test_a_failing_service_or_none_at_all_is_no_verdict():
    faults = FaultConfig(rate=1.0, statuses=[503], retry_after_seconds=60, endpoints=["/specs"])
    with run_sandbox(SandboxConfig(faults=faults)) as failing:
        check = check_key(Settings(api_key="test_unknown", base_url=failing.url))
    assert (check.status, check.refused) == (503, None)
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    check = check_key(Settings(api_key="sk-secret-keycheck", base_url=f"http://127.0.0.1:{port}"))
    assert (check.status, check.refused, check.error) == (None, None, "ConnectError"), check
    assert "sk-secret-keycheck" not in (check.error or "")


def test_the_key_stays_out_of_the_http_libraries_logs(sandbox, caplog):
    """The check is the command's first call, before any client guarded the HTTP loggers: httpx logged the
    request line, key and all, at INFO."""
    import logging

    secret = "sk-live-keycheck-LOGGED-4f1e"
    with caplog.at_level(logging.DEBUG):
        check_key(Settings(api_key=secret, base_url=sandbox.url))
    assert "/specs" in caplog.text  # the request was logged...
    assert secret not in caplog.text  # ...without the key
