"""Keeping the API key out of everything the client emits.

The key travels in the URL (`?key=...`), so every string that may contain a URL
(log lines, exception messages, echoed `input` objects) passes through here.
"""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "[redacted]"

# `key=...` in a query string, whatever the value; stops at the next separator. `token=` too: the
# webhook URL's per-run secret (connectors/webhooks.py) travels the same way.
KEY_PARAM = re.compile(r"([?&;](?:key|token)=)[^&#\s'\"]*", re.IGNORECASE)


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Remove `key=` query values and any literal secret from a string."""
    text = KEY_PARAM.sub(r"\1" + REDACTED, text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_echo(body: Any) -> Any:
    """Blank the `input.key` the service echoes back, whatever its value (the key may differ in case)."""
    if isinstance(body, dict):
        echoed = body.get("input")
        if isinstance(echoed, dict) and echoed.get("key"):
            body["input"] = {**echoed, "key": REDACTED}
    return body


class RedactingFilter(logging.Filter):
    """Logging filter that redacts key values from records of HTTP libraries.

    httpx logs every request URL at INFO ("HTTP Request: GET ...?key=..."); the
    filter rewrites the formatted message so handlers never see the key.
    """

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message, tuple(self.secrets))
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_FILTER = RedactingFilter()
# Filters do not apply to records propagated from child loggers, so each is named.
_GUARDED_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpx_aiohttp",
    "aiohttp.client",
    "connectors",
    "connectors.client",
)


def guard_loggers(secret: str | None) -> None:
    """Register a secret with the redacting filter on every HTTP-related logger."""
    if secret:
        _FILTER.secrets.add(secret)
    for name in _GUARDED_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
