"""Teams' 👍/👎 under an answer, with the same choices as Slack's 👎 ("What was wrong?").

Answers carry ``channelData.feedbackLoop = {"type": "custom"}`` (:func:`bot.teams.render.answer_activity`), so a
click on 👍 or 👎 sends the bot a ``message/fetchTask`` invoke. The vote is recorded at once, as a Slack click is;
👍 is answered with a short thank-you, 👎 with the form below (an Adaptive Card in a dialog): one of
:data:`bot.texts.FEEDBACK_CHOICES` and an optional comment. Sending it comes back as ``message/submitAction`` with
``actionValue.feedback`` the form's inputs as a JSON string; Teams' default form (``{"feedbackText": …}``) is read
the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from bot.core import MAX_COMMENT_CHARS
from bot.teams.activity import feedback_comment
from bot.texts import FEEDBACK_CHOICES

FETCH_TASK = "message/fetchTask"
SUBMIT_ACTION = "message/submitAction"
ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
THANKS = "Thanks for the feedback."


@dataclass(frozen=True)
class Vote:
    """A click or a sent form: ``polarity``, and for a 👎 form what was wrong (a key of FEEDBACK_CHOICES or "")."""

    polarity: Literal["up", "down"]
    choice: str = ""
    comment: str = ""


def parse_vote(value: Any) -> Vote | None:
    """The vote in a feedback invoke's ``value`` (``{"actionName": "feedback", "actionValue": {...}}``); None when
    the invoke is not a feedback vote."""
    value = value if isinstance(value, dict) else {}
    action = value.get("actionValue") if isinstance(value.get("actionValue"), dict) else {}
    reaction = str(action.get("reaction") or "").lower()
    if value.get("actionName") != "feedback" or reaction not in ("like", "dislike"):
        return None
    raw = action.get("feedback")
    form = _form(raw)
    choice = str(form.get("choice") or "")
    comment = str(form["comment"]).strip()[:MAX_COMMENT_CHARS] if isinstance(form.get("comment"), str) else ""
    return Vote(
        polarity="up" if reaction == "like" else "down",
        choice=choice if choice in FEEDBACK_CHOICES else "",
        comment=comment if "comment" in form or "choice" in form else feedback_comment(raw),
    )


def _form(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def form_card() -> dict[str, Any]:
    """The 👎 form, the Slack modal's fields: what was wrong (one choice, required) and an optional comment."""
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.5",
        "body": [
            {
                "type": "Input.ChoiceSet",
                "id": "choice",
                "label": "The answer…",
                "style": "expanded",
                "isRequired": True,
                "errorMessage": "Pick what was wrong.",
                "choices": [{"title": label, "value": key} for key, label in FEEDBACK_CHOICES.items()],
            },
            {
                "type": "Input.Text",
                "id": "comment",
                "label": "Anything else? (optional)",
                "isMultiline": True,
                "maxLength": MAX_COMMENT_CHARS,
                "placeholder": "What did you expect it to say, or where?",
            },
        ],
        "actions": [{"type": "Action.Submit", "title": "Send"}],
    }


def task_response(vote: Vote) -> dict[str, Any]:
    """The ``message/fetchTask`` answer: the form in a dialog for 👎, a thank-you for 👍."""
    if vote.polarity == "up":
        return {"task": {"type": "message", "value": THANKS}}
    return {
        "task": {
            "type": "continue",
            "value": {
                "title": "What was wrong?",
                "height": "medium",
                "width": "medium",
                "card": {"contentType": ADAPTIVE_CARD, "content": form_card()},
            },
        }
    }
