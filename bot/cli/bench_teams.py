"""``citebot bench teams``: ack and answer latency of the Teams bot over loopback.

Runs the real Teams app (``bot.teams.server.build_app``: CloudAdapter, unauthenticated mode) on
127.0.0.1 with the real CitebotService and SQLite store, and a local fake Bot Connector
(``eval.fakes.microsoft.FakeMicrosoft``) as the activities' ``serviceUrl``. It sends the sample contract PDF
to the bot in a personal chat (file attachment → download → ingest), then posts channel @mentions
one at a time and measures

* **ack**: the HTTP response time of ``POST /api/messages`` (the Bot Service waits ~15 s at most);
* **answer**: from the POST to the answer reaching the fake Bot Connector;
* **ingest**: from the POST of the file message to the "Indexed …" result.

The chat platform imports are lazy: this module only needs them when the benchmark runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from connectors.settings import Settings
from eval.bench.common import percentiles

TENANT = "bench-tenant"
CHANNEL = "19:bench@thread.tacv2"
CHAT = "a:1bench-personal"
BOT = {"id": "28:citebot-bench", "name": "Citebot"}


def register(sub: Any) -> None:
    p = sub.add_parser("teams", help="Teams bot ack and answer latency over loopback (fake Bot Connector)")
    p.add_argument("--questions", type=int, default=20, help="channel @mentions to time (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _personal_message(activity_id: str, service_url: str, **content: Any) -> dict[str, Any]:
    """A Bot Framework message activity from the bench user to the bot in its personal chat."""
    return {
        "type": "message",
        "id": activity_id,
        "channelId": "msteams",
        "serviceUrl": service_url,
        "from": {"id": "29:bench"},
        "recipient": BOT,
        "conversation": {"id": CHAT, "conversationType": "personal", "tenantId": TENANT},
        "channelData": {"tenant": {"id": TENANT}},
        **content,
    }


def _summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        **percentiles(ms),
        "max_ms": round(max(ms), 1) if ms else float("nan"),
        "mean_ms": round(statistics.fmean(ms), 1) if ms else float("nan"),
    }


def _has_citations(body: dict[str, Any]) -> int:
    return int(any(e.get("citation") for e in body.get("entities") or []))


def run(args: argparse.Namespace, settings: Settings) -> int:
    import requests

    from bot.core import ChatContext, ChatCore
    from bot.teams.activity import FILE_DOWNLOAD_INFO
    from bot.teams.server import anonymous_authentication, build_app
    from eval.fakes.microsoft import AppThread, FakeMicrosoft
    from eval.sample_pdfs import CONTRACT, facts, sample_bytes

    ids = itertools.count(1_800_000_000_000)
    questions = [f.question for f in facts() if f.file == CONTRACT and f.kind != "ocr"] or ["What is this about?"]
    with tempfile.TemporaryDirectory() as tmp, FakeMicrosoft() as fake:
        bench_settings = settings.model_copy(
            # the fake Microsoft endpoints are configured hosts, so downloads may reach them on loopback
            update={"data_dir": Path(tmp), "teams_app_id": None, "teams_app_password": None,
                    "teams_graph_url": fake.graph_url, "teams_token_url": fake.token_url}
        )
        core = ChatCore.from_settings(bench_settings)
        t = time.perf_counter()
        core.service.warm_up()
        warm_s = time.perf_counter() - t
        # loopback only, unauthenticated by choice: the bench's own app, so no --insecure-local warning to the reader
        with AppThread(build_app(bench_settings, core, auth=anonymous_authentication())) as app:
            url = f"{app.url}/api/messages"

            def post(activity: dict[str, Any]) -> tuple[float, float]:
                t0 = time.perf_counter()
                resp = requests.post(url, json=activity, timeout=60)
                resp.raise_for_status()
                return t0, time.perf_counter() - t0

            def ask(activity: dict[str, Any]) -> tuple[float, float, int]:
                """(ack seconds, seconds to the answer, 1 if it carries citations) for one question activity."""
                t0, ack = post(activity)
                answer = fake.wait_for(
                    lambda c, a=activity["id"]: c.reply_to_id == a and c.type == "message",  # type: ignore[misc]
                    timeout=120,
                )[-1]
                return ack, answer.at - t0, _has_citations(answer.body)

            # 1) a PDF sent in a personal chat: ack, then the ingest result
            fake.files["contract"] = sample_bytes(CONTRACT)
            file_msg = _personal_message(
                str(next(ids)),
                fake.service_url,
                attachments=[
                    {
                        "contentType": FILE_DOWNLOAD_INFO,
                        "name": CONTRACT,
                        "content": {"downloadUrl": fake.file_url("contract"), "fileType": "pdf"},
                    }
                ],
            )
            t0, ingest_ack = post(file_msg)
            done = fake.wait_for(lambda c: c.conversation_id == CHAT and "Indexed" in c.text, timeout=600)[-1]
            ingest_s = done.at - t0

            # 2) questions in the same chat scope, one at a time (personal chat = the file's scope)
            acks: list[float] = []
            answers: list[float] = []
            cited = 0
            for i in range(args.questions):
                activity_id = str(next(ids))
                msg = _personal_message(activity_id, fake.service_url, text=questions[i % len(questions)])
                ack, answer_s, has_citations = ask(msg)
                acks.append(ack)
                answers.append(answer_s)
                cited += has_citations

            # 3) the same through a channel @mention (thread reply, quote card); the channel gets its own copy
            channel_scope = f"teams:{TENANT}:{CHANNEL}"
            core.upload(
                ChatContext(platform="teams", scope=channel_scope, user="29:bench"),
                file_name=CONTRACT,
                data=sample_bytes(CONTRACT),
            )
            ch_acks: list[float] = []
            ch_answers: list[float] = []
            ch_cited = 0
            for i in range(max(1, args.questions // 4)):
                activity_id = str(next(ids))
                msg = {
                    "type": "message",
                    "id": activity_id,
                    "channelId": "msteams",
                    "serviceUrl": fake.service_url,
                    "from": {"id": "29:bench"},
                    "recipient": BOT,
                    "conversation": {
                        "id": f"{CHANNEL};messageid={activity_id}",
                        "conversationType": "channel",
                        "tenantId": TENANT,
                    },
                    "channelData": {"channel": {"id": CHANNEL}, "tenant": {"id": TENANT}},
                    "text": f"<at>Citebot</at> {questions[i % len(questions)]}",
                    "entities": [{"type": "mention", "text": "<at>Citebot</at>", "mentioned": BOT}],
                }
                ack, answer_s, has_citations = ask(msg)
                ch_acks.append(ack)
                ch_answers.append(answer_s)
                ch_cited += has_citations

    report: dict[str, Any] = {
        "warm_up_s": round(warm_s, 2),
        "ingest": {"file": CONTRACT, "ack_ms": round(ingest_ack * 1000, 1), "result_s": round(ingest_s, 2)},
        "chat_ack": _summary(acks),
        "chat_answer": {**_summary(answers), "with_citations": cited},
        "channel_ack": _summary(ch_acks),
        "channel_answer": {**_summary(ch_answers), "with_citations": ch_cited},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"Teams bot over loopback (fake Bot Connector), model warm-up {report['warm_up_s']} s")
    print(f"ingest {CONTRACT}: ack {report['ingest']['ack_ms']} ms, result after {report['ingest']['result_s']} s")
    print(f"{'':16}{'n':>4}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}{'cited':>7}")
    for name in ("chat_ack", "chat_answer", "channel_ack", "channel_answer"):
        s = report[name]
        cited_n = s.get("with_citations", "")
        print(f"{name:16}{s['n']:>4}{s['p50_ms']:>10}{s['p95_ms']:>10}{s['max_ms']:>10}{cited_n!s:>7}")
    return 0
