"""Which scopes a Slack question may search.

* In a channel (or group DM): that channel's scope only.
* In a DM with the bot: the DM's own scope plus the scopes of the channels the asker is a member of
  right now, read with ``users.conversations`` (bot token, ``user=`` the asker) and cached for at most
  five minutes. If Slack cannot say, the DM searches only itself: never a channel the asker is not in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from pipelines.models import slack_scope

log = structlog.get_logger(__name__)

MEMBERSHIP_TTL_S = 300.0
_TYPES = "public_channel,private_channel,mpim"


class MembershipCache:
    """``(team, user) -> channel ids`` from ``users.conversations``, cached for ``ttl_s`` (≤ 300 s)."""

    def __init__(
        self, client: WebClient, *, ttl_s: float = MEMBERSHIP_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0 <= ttl_s <= MEMBERSHIP_TTL_S:
            raise ValueError(f"ttl_s must be between 0 and {MEMBERSHIP_TTL_S:.0f} seconds")
        self._client = client
        self._ttl = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[float, tuple[str, ...]]] = {}

    def channels(self, team: str, user: str) -> tuple[str, ...] | None:
        """Channel ids ``user`` is a member of, or None when Slack could not be asked."""
        key = (team, user)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < self._ttl:
                return hit[1]
        try:
            found = self._fetch(team, user)
        except (SlackApiError, SlackClientError, OSError) as e:
            log.warning("membership_lookup_failed", team=team, user=user, error=type(e).__name__)
            return None
        with self._lock:
            self._cache[key] = (now, found)
        return found

    def _fetch(self, team: str, user: str) -> tuple[str, ...]:
        ids: list[str] = []
        cursor = ""
        for _ in range(50):  # 50 pages of 200: 10,000 channels is plenty
            resp = self._client.users_conversations(
                user=user, types=_TYPES, exclude_archived=True, limit=200, cursor=cursor or None
            )
            ids.extend(str(c["id"]) for c in resp.get("channels") or [] if c.get("id"))
            cursor = str((resp.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
        return tuple(dict.fromkeys(ids))


def dm_search_scopes(cache: MembershipCache, *, team: str, dm_channel: str, user: str) -> tuple[str, ...]:
    """The DM's own scope first, then the asker's current channels."""
    own = slack_scope(team, dm_channel)
    channels = cache.channels(team, user) or ()
    return (own, *(slack_scope(team, c) for c in channels if c != dm_channel))
