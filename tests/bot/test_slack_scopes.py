"""DM search scopes from live channel membership (users.conversations against the fake Slack API)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from bot.slack.scopes import MembershipCache, dm_search_scopes
from eval.fakes.slack_api import BOT_TOKEN, TEAM, FakeSlack


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as f:
        f.memberships = {"U1": ["C1", "C2"]}
        yield f


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_dm_scopes_are_the_dm_then_the_askers_channels(fake: FakeSlack) -> None:
    cache = MembershipCache(WebClient(token=BOT_TOKEN, base_url=fake.url, timeout=5))
    assert dm_search_scopes(cache, team=TEAM, dm_channel="D1", user="U1") == (
        f"slack:{TEAM}:D1",
        f"slack:{TEAM}:C1",
        f"slack:{TEAM}:C2",
    )
    call = fake.calls_to("users.conversations")[0]
    assert call.params["user"] == "U1" and "private_channel" in call.params["types"]


def test_membership_is_cached_at_most_five_minutes(fake: FakeSlack) -> None:
    clock = Clock()
    cache = MembershipCache(WebClient(token=BOT_TOKEN, base_url=fake.url, timeout=5), clock=clock)
    assert cache.channels(TEAM, "U1") == ("C1", "C2")
    fake.memberships["U1"] = ["C1"]  # U1 leaves C2
    clock.now += 299
    assert cache.channels(TEAM, "U1") == ("C1", "C2")  # cached
    assert len(fake.calls_to("users.conversations")) == 1
    clock.now += 2
    assert cache.channels(TEAM, "U1") == ("C1",)  # asked again: C2 is gone from the DM's reach
    with pytest.raises(ValueError, match="between 0 and 300"):
        MembershipCache(WebClient(token=BOT_TOKEN, base_url=fake.url), ttl_s=600)


def test_when_slack_cannot_say_the_dm_searches_only_itself(fake: FakeSlack) -> None:
    fake.fail["users.conversations"] = "internal_error"
    cache = MembershipCache(WebClient(token=BOT_TOKEN, base_url=fake.url, timeout=5))
    assert dm_search_scopes(cache, team=TEAM, dm_channel="D1", user="U1") == (f"slack:{TEAM}:D1",)
    del fake.fail["users.conversations"]
    assert cache.channels(TEAM, "U1") == ("C1", "C2")  # a failure is not cached
