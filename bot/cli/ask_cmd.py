"""``citebot ask "QUESTION"``: an answer with quoted, checked citations (or a refusal) on the terminal."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from connectors.settings import Settings
from pipelines.models import LOCAL_SCOPE, Answer


def register(sub: Any) -> None:
    p = sub.add_parser("ask", help="answer a question about the indexed PDFs, with quotes")
    p.add_argument("question")
    p.add_argument("--scope", action="append", help=f"scope to search (repeatable; default {LOCAL_SCOPE})")
    p.add_argument("--json", action="store_true", help="print the Answer as JSON")
    p.add_argument("--mode", choices=["hybrid", "bm25", "dense"], default="hybrid", help="retrieval mode")
    p.add_argument("--k", type=int, default=None, help="passages given to the answerer (default settings)")
    p.set_defaults(func=run_ask)


def location(file: str, page_start: int, page_end: int, section: str) -> str:
    page = f"p. {page_start}" if page_end in (0, page_start) else f"pp. {page_start}–{page_end}"
    last = section.split(" > ")[-1] if section else ""
    return " · ".join(x for x in (file, page, last) if x)


def render_answer(answer: Answer, *, width: int = 100) -> str:
    """The answer text, then each citation as a quote block with its ``file · p. N · section`` line."""
    lines = [answer.text]
    for c in answer.citations:
        lines.append("")
        quote_lines = []
        for raw in c.quote.splitlines() or [""]:
            quote_lines += textwrap.wrap(raw, width=width - 6) or [""]
        lines.append(f"  [{c.n}] │ " + quote_lines[0])
        lines += [f"      │ {ln}" for ln in quote_lines[1:]]
        lines.append(f"        — {location(c.file, c.page_start, c.page_end, c.section)}")
    if answer.note:
        lines += ["", f"({answer.note})"]
    return "\n".join(lines)


def run_ask(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.llm import LLMError
    from connectors.store_api import ScopeRequiredError, StoreError
    from pipelines.service import CitebotService

    if args.k is not None and not 1 <= args.k <= 50:
        print("citebot ask: --k must be between 1 and 50", file=sys.stderr)
        return 2
    scopes = args.scope or [LOCAL_SCOPE]
    try:
        service = CitebotService(settings)
        if not service.list_documents(scopes):
            print(
                f"No PDFs are indexed in {', '.join(scopes)} yet. Run `citebot demo` for the samples, "
                "or index your own PDFs first.",
                file=sys.stderr,
            )
            return 1
        answer = service.answer(args.question, scopes, mode=args.mode, k=args.k)
        if service.query.embedding_mismatch:
            print("citebot ask: the index was built with another embedding setting; run `citebot reindex` "
                  "(`citebot reindex --check` says why).", file=sys.stderr)
    except (ScopeRequiredError, ValueError) as e:
        print(f"citebot ask: {e}", file=sys.stderr)
        return 2
    except (StoreError, LLMError) as e:
        print(f"citebot ask: could not answer ({type(e).__name__}); see the log above.", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(answer.model_dump(), indent=2, ensure_ascii=False))
    else:
        print(render_answer(answer))
    return 0
