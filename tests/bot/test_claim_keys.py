"""Claim keys are stored in the chat state: their text must not change across releases (a re-delivery after an
upgrade must still find the claim its first delivery took)."""

from __future__ import annotations

from bot.core import ClaimKey


def test_the_stored_text_of_each_kind_of_claim() -> None:
    assert str(ClaimKey.slack_event("Ev1")) == "slack:event:Ev1"
    assert str(ClaimKey.slack_answer("T1", "C1", "111.2")) == "slack:answer:T1:C1:111.2"
    assert str(ClaimKey.slack_file("T1", "C1", "F1")) == "slack:file:T1:C1:F1"
    assert str(ClaimKey.teams_message("19:abc@thread.tacv2", "1700000000000")) == (
        "teams:msg:19:abc@thread.tacv2:1700000000000"
    )
