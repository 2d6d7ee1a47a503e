"""The Slack bot under test, two ways: the real Bolt app in this process behind a local HTTP server
(:class:`SlackHarness`), or ``citebot serve slack --http`` as a process of its own (:class:`SlackProcess`). Either way
Slack's Web API is the local fake (:class:`eval.fakes.slack_api.FakeSlack`), driven by the production client."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.core import ChatCore
from bot.slack.app import SlackBot, build_bot
from bot.slack.server import make_http_server
from connectors.settings import Settings
from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, TEAM, FakeSlack, event_callback, post_signed
from tests.helpers.process import CitebotProcess


@dataclass
class SlackHarness:
    """The real Bolt app of ``bot`` served on 127.0.0.1 at ``url``; ``fake`` records what it sent Slack."""

    fake: FakeSlack
    bot: SlackBot
    core: ChatCore
    url: str

    @classmethod
    @contextmanager
    def serving(cls, settings: Settings, core: ChatCore, fake: FakeSlack) -> Iterator[SlackHarness]:
        """``build_bot`` over ``core`` (the production Web API client, pointed at the fake by ``slack_api_url``),
        behind ``make_http_server``; closed on exit."""
        bot = build_bot(settings, core)
        server = make_http_server(bot.app, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield cls(fake, bot, core, f"http://127.0.0.1:{server.server_address[1]}/slack/events")
        finally:
            server.shutdown()
            server.server_close()
            bot.close()

    @staticmethod
    def settings(data_dir: Path, fake: FakeSlack, **more: Any) -> Settings:
        """Settings for a bot that talks to ``fake`` with the fake's token and signing secret, OCR off."""
        return Settings(
            _env_file=None,  # type: ignore[call-arg]
            data_dir=data_dir, slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
            slack_api_url=fake.url, ocr_enabled=False, **more,
        )

    # --- what Slack sends ---------------------------------------------------------------------------
    def send(self, event: dict[str, Any], *, team: str = TEAM, event_id: str | None = None, **kw: Any) -> int:
        status, _ = post_signed(self.url, event_callback(event, team=team, event_id=event_id), **kw)
        return status

    def command(self, text: str, *, channel: str, user: str, name: str = "cmd") -> tuple[int, bytes]:
        payload = {
            "token": "unused",
            "team_id": TEAM,
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "command": "/citebot",
            "text": text,
            "response_url": self.fake.response_url(name),
            "trigger_id": "1.2.3",
        }
        return post_signed(self.url, payload, form=True)

    def idle(self, timeout: float = 60) -> None:
        assert self.bot.wait_idle(timeout), "the bot's worker pool did not finish"

    # --- what the bot posted ------------------------------------------------------------------------
    def answers(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """Answer messages (with blocks) the bot posted in a thread."""
        return [
            c.params
            for c in self.fake.calls_to("chat.postMessage", channel=channel, thread_ts=thread_ts)
            if c.params.get("blocks")
        ]

    def locations(self, params: dict[str, Any]) -> list[str]:
        """The citation location lines as mrkdwn (``<url|file, p. N> · section`` or ``file · p. N · section``)."""
        return [
            b["elements"][0]["text"]
            for b in params["blocks"]
            if b["type"] == "context" and (" · p" in b["elements"][0]["text"] or "|" in b["elements"][0]["text"])
        ]

    def files_cited(self, params: dict[str, Any]) -> set[str]:
        names = set()
        for text in self.locations(params):
            if text.startswith("<") and "|" in text:  # a link to the file: <url|file, p. N>
                names.add(text.split("|", 1)[1].split(", p", 1)[0])
            else:
                names.add(text.split(" · ")[0])
        return names

    def feedback_buttons(self, params: dict[str, Any]) -> dict[str, Any]:
        """The feedback_buttons element under an answer (the test fails if there is none)."""
        (element,) = [
            e for b in params["blocks"] if b["type"] == "context_actions" for e in b["elements"]
            if e["type"] == "feedback_buttons"
        ]
        return element


class SlackProcess(CitebotProcess):
    """``citebot serve slack --http`` (and ``--metrics-port`` if given) in its own process group; ``url`` is where
    Slack delivers events."""

    def __init__(self, fake: FakeSlack, data_dir: Path, log: Path, *, metrics_port: int | None = None,
                 launcher: Sequence[str] = (), **settings: str) -> None:
        args = ["serve", "slack", "--http"]
        if metrics_port is not None:
            args += ["--metrics-port", str(metrics_port)]
        self.metrics_port = metrics_port
        super().__init__(args, data_dir, log, {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                                                "CITEBOT_SLACK_API_URL": fake.url, **settings}, launcher=launcher)
        self.url = f"{self.base}/slack/events"
