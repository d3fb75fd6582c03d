"""Posting a run's changes to a webhook: bounded retries with backoff, never a secret, one line on failure."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from fleet_data.connectors.notify import NotifyError, PostRetries, post_json, target_of, validate_url

from .receiver import Receiver, TrickleReceiver

SECRET = "sk-live-NOTIFY-SECRET-4411"
MESSAGE = {"text": "1 vehicle must be parked now", "changes": [{"vin": "1HGCM82633A004352", "kind": "new_recall"}]}


def test_a_message_is_posted_once_as_json():
    waits: list[float] = []
    with Receiver() as receiver:
        delivery = post_json(receiver.url, MESSAGE, idempotency_key="fleet-changes-r1", sleep=waits.append)
    assert delivery.sent and delivery.attempts == 1 and delivery.status == 200 and waits == []
    [post] = receiver.posts
    assert post.json() == MESSAGE
    assert post.headers["Content-Type"].startswith("application/json")
    assert post.headers["Idempotency-Key"] == "fleet-changes-r1"  # a receiver can drop a repeat


def test_transient_answers_are_retried_with_growing_waits_and_retry_after_honoured():
    waits: list[float] = []
    answers = [(503, {}), (502, {}), (429, {"Retry-After": "3"}), (200, {})]
    with Receiver(answers=answers) as receiver:
        delivery = post_json(receiver.url, MESSAGE, retries=PostRetries(5, 0.5), idempotency_key="k1", sleep=waits.append)
    assert delivery.sent and delivery.attempts == 4 and len(receiver.posts) == 4
    assert 0.3 <= waits[0] < waits[1] and waits[2] == 3.0  # backoff grows; the receiver's Retry-After wins
    assert len({p.headers["Idempotency-Key"] for p in receiver.posts}) == 1  # every attempt is the same message


def test_retries_are_bounded_and_a_refusal_is_not_retried():
    waits: list[float] = []
    with Receiver(answers=[(500, {})]) as receiver:
        failed = post_json(receiver.url, MESSAGE, retries=PostRetries(3), sleep=waits.append)
    assert not failed.sent and failed.attempts == 3 and len(receiver.posts) == 3 and len(waits) == 2
    assert failed.error == "HTTP 500 after 3 attempts"

    with Receiver(answers=[(404, {})]) as receiver:
        refused = post_json(receiver.url, MESSAGE, retries=PostRetries(3), sleep=waits.append)
    assert not refused.sent and refused.attempts == 1 and refused.error == "HTTP 404 (not retried)"


def test_an_unreachable_receiver_is_retried_then_reported_without_its_path():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/services/T0/B0/XyZsecret"
    waits: list[float] = []
    delivery = post_json(url, MESSAGE, retries=PostRetries(2), sleep=waits.append)
    assert not delivery.sent and delivery.attempts == 2 and len(waits) == 1
    assert delivery.target == f"http://127.0.0.1:{port}"
    assert "XyZsecret" not in repr(delivery)  # a webhook URL's path is often its credential


def test_a_secret_never_leaves_even_if_the_message_holds_it():
    leaky = {"text": f"oops {SECRET}", "changes": [{"note": f"https://api.example/specs?vin=1&key={SECRET}"}]}
    with Receiver() as receiver:
        assert post_json(receiver.url, leaky, secrets=(SECRET,), sleep=lambda s: None).sent
    [post] = receiver.posts
    assert SECRET not in post.body.decode() and SECRET not in str(post.headers) and SECRET not in post.query


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "example.com/hook", "http://", "https:///x"])
def test_a_url_that_cannot_take_a_post_is_refused_in_one_line(url):
    with pytest.raises(NotifyError) as refused:
        validate_url(url)
    assert "\n" not in str(refused.value) and "http" in str(refused.value)


def test_the_target_names_only_scheme_host_and_port():
    assert target_of("https://hooks.slack.com/services/T0/B0/abc?x=1") == "https://hooks.slack.com"


def _post_in_thread(url: str, **kwargs: Any) -> tuple[threading.Thread, list]:
    delivered: list = []
    thread = threading.Thread(target=lambda: delivered.append(post_json(url, MESSAGE, **kwargs)), daemon=True)
    thread.start()
    return thread, delivered


def test_a_receiver_that_trickles_its_answer_is_given_up_at_the_deadline():
    # One byte every 2 s never trips httpx's per-read timeout (10 s): before the deadlines, this post never
    # ended. Each attempt is bounded as a whole, and so are all of them.
    retries = PostRetries(attempts=3, backoff=0.1, attempt_seconds=1.5, total_seconds=4.0)
    with TrickleReceiver(every=2.0) as receiver:
        thread, delivered = _post_in_thread(receiver.url, retries=retries)
        thread.join(timeout=60)  # generous: the deadline is 4 s
        assert not thread.is_alive(), "the post to a trickling receiver did not end"
    [delivery] = delivered
    assert not delivery.sent and delivery.status is None and 1 <= delivery.attempts <= 3
    assert "no whole answer within" in (delivery.error or "")
    assert receiver.connections == delivery.attempts


def test_a_stop_ends_a_stuck_post_at_once():
    stopped = threading.Event()
    retries = PostRetries(attempts=4, attempt_seconds=600, total_seconds=600)
    with TrickleReceiver(every=2.0) as receiver:
        thread, delivered = _post_in_thread(receiver.url, retries=retries, stop=stopped.is_set)
        while not receiver.connections:  # the post is under way, stuck on the trickle
            time.sleep(0.05)
        stopped.set()
        thread.join(timeout=30)  # generous: a stop is looked at every 0.25 s
        assert not thread.is_alive(), "a stop did not end the stuck post"
    [delivery] = delivered
    assert not delivery.sent and delivery.attempts == 1 and "stopped" in (delivery.error or "")
