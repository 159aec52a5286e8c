"""Webhook notifications: a generic JSON webhook, or a Slack/Discord-compatible message.

Delivery is one HTTP POST with the standard library (urllib), retried with tenacity on transient
failures (connection errors, timeouts, 408/429/5xx) within a bounded time, on daemon threads (tools.pool), so a
hanging or unreachable webhook never holds up a check-in, a round or the process's exit. What a
round could not deliver stays in the run's outbox and is tried again next round.

A webhook URL is a secret (Slack and Discord put the token in the path): it is kept in memory
only. Everything that is printed, logged or stored names a destination by its position and kind
(`webhook 1 (slack)`) or a hash of it, and failure messages are built from the exception type and
HTTP status, never from an exception's text.

Formats, chosen from the URL (or forced with a `json+`, `slack+` or `discord+` prefix):
- `slack`  (hooks.slack.com, or a Discord URL ending in `/slack`): `{"text": ...}`
- `discord` (discord.com/api/webhooks/...): `{"content": ...}` (2000 characters at most)
- `json` (anything else): `{"text": ..., "event": "rlagent.notice", ...the notice's fields}`,
  which Mattermost, Rocket.Chat, Teams workflows and most chat bridges also show as text.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from rlagent.models.incidents import Notice

Kind = Literal["json", "slack", "discord"]
USER_AGENT = "rlagent-notify/1"


class NotifySettings(BaseModel):
    """`--notify URL` (repeatable), `[notify]` in the TOML, `RLAGENT_NOTIFY__URLS='["https://..."]'`."""

    urls: list[str] = Field(default_factory=list, repr=False)
    """Webhooks to notify (secrets: never printed, logged or stored)."""
    remind_every: str = "6h"
    """A reminder while an incident stays open and unacknowledged, this often."""
    timeout_s: float = Field(5.0, gt=0, le=60)
    """Timeout of one HTTP attempt (connect, and each read)."""
    attempts: int = Field(3, ge=1, le=10)
    """Attempts within one round (backoff 0.5 s, 1 s, 2 s ...); then the next round tries again."""
    max_rounds: int = Field(48, ge=1)
    """A message no round could deliver is dropped (with a note) after this many rounds."""


class DeliveryError(Exception):
    """A failed delivery; its message never contains the URL."""

    def __init__(self, message: str, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Destination:
    index: int
    kind: Kind
    url: str
    id: str
    """Stable hash of the URL: how the outbox names it."""

    @property
    def label(self) -> str:
        return f"webhook {self.index} ({self.kind})"

    def __repr__(self) -> str:  # never the URL, also not in a traceback's locals
        return f"Destination({self.label})"


def parse_destinations(urls: list[str]) -> list[Destination]:
    """Destinations from URLs; a malformed one raises ValueError naming its position, not its text."""
    found = []
    for index, raw in enumerate(urls, start=1):
        kind: Kind | None = None
        url = raw.strip()
        for prefix in ("json+", "slack+", "discord+"):
            if url.startswith(prefix):
                kind, url = prefix[:-1], url[len(prefix) :]  # type: ignore[assignment]
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
        except ValueError as exc:  # `http://[::1`: urlsplit's own words, without the URL (it may hold a token)
            raise ValueError(f"notify URL #{index} is not an http(s) URL ({exc})") from exc
        if parts.scheme not in ("http", "https") or not hostname:
            raise ValueError(f"notify URL #{index} is not an http(s) URL")
        if kind is None:
            host = parts.hostname.lower()
            if host == "hooks.slack.com" or (host.endswith("discord.com") and parts.path.rstrip("/").endswith("/slack")):
                kind = "slack"
            elif host in ("discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com"):
                kind = "discord"
            else:
                kind = "json"
        found.append(Destination(index=index, kind=kind, url=url, id=hashlib.sha256(url.encode()).hexdigest()[:16]))
    return found


def payload(dest: Destination, notice: Notice) -> str:
    text = notice.text()
    if dest.kind == "slack":
        body: dict = {"text": text}
    elif dest.kind == "discord":
        body = {"content": text if len(text) <= 2000 else text[:1990] + "\n…"}
    else:
        body = {"text": text, "event": "rlagent.notice", **notice.model_dump(mode="json")}
    return json.dumps(body, ensure_ascii=False)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, DeliveryError) and exc.transient


def post_once(dest: Destination, body: str, timeout_s: float) -> None:
    request = urllib.request.Request(
        dest.url,
        data=body.encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read(4096)
    except urllib.error.HTTPError as exc:
        code = exc.code
        raise DeliveryError(f"HTTP {code}", transient=code in (408, 425, 429) or code >= 500) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        what = "timed out" if isinstance(reason, TimeoutError) else type(reason).__name__
        raise DeliveryError(f"connection failed ({what})", transient=True) from None
    except TimeoutError:
        raise DeliveryError("timed out", transient=True) from None
    except OSError as exc:
        raise DeliveryError(f"connection failed ({type(exc).__name__})", transient=True) from None


def deliver(dest: Destination, body: str, settings: NotifySettings, sleep: Callable[[float], None] | None = None) -> None:
    """POST `body`, retrying transient failures; raises DeliveryError when it could not."""
    kwargs = {"sleep": sleep} if sleep is not None else {}
    retrying = Retrying(
        stop=stop_after_attempt(settings.attempts) | stop_after_delay(settings.timeout_s * settings.attempts + 5),
        wait=wait_exponential(multiplier=0.5, max=4),
        retry=retry_if_exception(_transient),
        reraise=True,
        **kwargs,
    )
    for attempt in retrying:
        with attempt:
            post_once(dest, body, settings.timeout_s)
