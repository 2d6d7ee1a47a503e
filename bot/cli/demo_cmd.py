"""``citebot demo``: index the bundled sample PDFs into scope ``local`` and answer a few sample questions.

Everything runs on the embedded defaults (SQLite store, packaged embedding model) with no network.
Running it again is idempotent: unchanged PDFs are reported as already indexed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from connectors.settings import Settings
from pipelines.models import LOCAL_SCOPE

# one about a table, one about a page range, one plain fact, one the PDFs cannot answer
DEMO_QUESTIONS = (
    "Which year in table 2 has the highest revenue?",
    "What do pages 4-5 say about parental leave?",
    "What is the initial term of the services agreement?",
    "What is the company's policy on bringing dogs to the office?",
)


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="index the sample PDFs and answer sample questions (offline)")
    p.add_argument("--question", action="append", help="ask these instead of the sample questions")
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace, settings: Settings) -> int:
    from bot.cli.ask_cmd import render_answer
    from bot.cli.ingest_cmd import chunks
    from bot.cli.notices import ocr_language_problem
    from eval.sample_pdfs import write_samples
    from pipelines.service import CitebotService

    problem = ocr_language_problem(settings)
    if problem:
        print(f"citebot demo: {problem}", file=sys.stderr)
        return 2
    samples = settings.data_dir / "samples"
    paths = write_samples(samples)
    print(f"Sample PDFs in {samples}:")
    service = CitebotService(settings)
    failed = 0
    for path in paths:
        r = service.ingest(
            path.read_bytes(), file_name=path.name, scope=LOCAL_SCOPE, source_url=path.resolve().as_uri()
        )
        if r.status == "failed":
            failed += 1
            print(f"  ✗ {r.file}: {r.error}")
        elif r.status == "unchanged":
            print(f"  = {r.file}: unchanged, already indexed ({r.pages} pages, {chunks(r.chunks)})")
        else:
            ocr = f", {r.ocr_pages} scanned pages read with OCR" if r.ocr_pages else ""
            print(f"  ✓ {r.file}: indexed {r.pages} pages into {chunks(r.chunks)} in {r.seconds:.1f} s{ocr}")
    if failed == len(paths):
        print("No sample PDF could be indexed; see the errors above.", file=sys.stderr)
        return 1
    for q in args.question or DEMO_QUESTIONS:
        answer = service.answer(q, [LOCAL_SCOPE])
        print()
        print(f"Q: {q}")
        print(render_answer(answer))
        print(f"   [{answer.mode}, {'refused' if answer.refused else 'answered'}, {answer.timings_ms.total:.0f} ms]")
    print()
    print('Ask your own: citebot ask "How many days of annual leave after 10 years?"')
    return 0
