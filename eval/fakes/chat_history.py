"""Two made-up months of chat for the ``citebot quality`` screenshot (``deploy/screenshots.sh``), never the product.

Three channels ask about three PDFs; about one answer in six is a refusal and one in fifteen gets a 👎, until
the last week, when a new expenses policy makes the bot quote the old hotel section and the 👎 rate doubles:
the alarm the weekly check exists for. Written through the chat state's own API (answers as the chat core
records them, votes as the adapters add them); only the answers' times are set back. Seeded: the same bytes
every time.

    python -m eval.fakes.chat_history DATA_DIR [--until 2026-11-25]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from connectors.state_log import StateLog
from pipelines.models import Answer, Citation, ValidationCounts

SCOPES = ("slack:T0ACME:C0PEOPLE", "slack:T0ACME:C0FINANCE", "teams:contoso:19:legal-thread")
SOURCES = {  # scope -> (file, section) it is asked about
    SCOPES[0]: [("employee-handbook.pdf", "4 Leave > 4.2 Parental leave"), ("employee-handbook.pdf", "6 Benefits")],
    SCOPES[1]: [("expenses-policy.pdf", "3 Travel > 3.2 Hotels"), ("expenses-policy.pdf", "5 Per diem")],
    SCOPES[2]: [("supplier-contract.pdf", "Article 7 Delivery"), ("supplier-contract.pdf", "Article 12 Liability")],
}
CHOICES = ("wrong_passage", "missing_information", "should_have_refused", "other", "")


def make(data_dir: Path, *, until: datetime, weeks: int = 8, seed: int = 7) -> int:
    """Write the history into ``data_dir/state.sqlite3``; returns how many answers it holds."""
    rng = random.Random(seed)
    state = StateLog(data_dir / "state.sqlite3")
    times: list[tuple[str, str]] = []
    n = 0
    for day in range(weeks * 7, 0, -1):
        last_week = day <= 7
        for _ in range(rng.randint(8, 12)):
            n += 1
            scope = rng.choice(SCOPES)
            file, section = rng.choice(SOURCES[scope])
            if last_week and scope == SCOPES[1] and rng.random() < 0.6:
                file, section = "expenses-policy.pdf", "3 Travel > 3.2 Hotels"
            refused = rng.random() < 0.14
            dropped = 1 if not refused and rng.random() < 0.04 else 0
            cites = [] if refused else [Citation(n=1, chunk_id=f"d:{n}", doc_id="d", file=file, page_start=3,
                                                 page_end=3, section=section, quote="(quoted passage)", url="")]
            answer = Answer(text="(answer)", refused=refused, citations=cites, mode="llm" if dropped else "extractive",
                            note="", validation=ValidationCounts(exact=len(cites), unmatched=dropped))
            ref = f"M{n}"
            state.record_answer(platform=scope.split(":")[0], message_ref=ref, thread_ref=ref, scope=scope,
                                user=f"U{rng.randint(1, 40)}", question="(question)",
                                answer_json=answer.model_dump_json())
            hotels = last_week and section.endswith("Hotels")
            down = rng.random() < (0.45 if hotels else 0.06)
            if down:
                choice = "wrong_passage" if hotels else rng.choice(CHOICES)
                state.add_feedback(platform=scope.split(":")[0], message_ref=ref, user="U99", polarity="down",
                                   choice=choice)
            elif rng.random() < 0.2:
                state.add_feedback(platform=scope.split(":")[0], message_ref=ref, user="U98", polarity="up")
            at = until - timedelta(days=day - 1, hours=rng.uniform(1, 20))
            times.append((at.isoformat(timespec="seconds"), ref))
    with sqlite3.connect(state.path) as db:
        db.executemany("UPDATE answers SET at = ? WHERE message_ref = ?", times)
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.fakes.chat_history", description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--until", default="2026-11-25T12:00:00+00:00")
    args = parser.parse_args(argv)
    until = datetime.fromisoformat(args.until)
    print(make(args.data_dir, until=until if until.tzinfo else until.replace(tzinfo=UTC)), "answers written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
