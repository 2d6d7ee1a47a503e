"""``citebot ask "QUESTION"``: an answer with quoted, checked citations (or a refusal) on the terminal.

A citation names the file by its local path (kept at ``citebot ingest`` time as a ``file://`` link), relative
to the working directory when it lies below it; files indexed from chat keep their names.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from bot.texts import location_text
from connectors.settings import Settings
from pipelines.models import LOCAL_SCOPE, Answer, RetrievalMode, for_people

# The query pipeline words its refusal for a chat channel; on the command line there is no channel.
CHANNEL_REFUSAL = "The PDFs in this channel"
CLI_REFUSAL = "The indexed PDFs"
# A "which one?" answer's numbered readings stay; its hint speaks of a thread, which a terminal does not have.
CLI_CHOICE_HINT = "Ask again with the question of the one you mean: citebot ask \"…\""


def register(sub: Any) -> None:
    p = sub.add_parser("ask", help="answer a question about the indexed PDFs, with quotes")
    p.add_argument("question")
    p.add_argument("--scope", action="append", help=f"scope to search (repeatable; default {LOCAL_SCOPE})")
    p.add_argument("--json", action="store_true", help="print the Answer as JSON")
    p.add_argument("--mode", choices=[m.value for m in RetrievalMode], default=RetrievalMode.HYBRID.value,
                   help="retrieval mode")
    p.add_argument("--k", type=int, default=None, help="passages given to the answerer (default settings)")
    p.set_defaults(func=run_ask)


def local_path(url: str) -> str:
    """The path a ``file://`` link names (relative to the working directory when below it), else ""."""
    parts = urlsplit(url)
    if parts.scheme != "file" or not parts.path:
        return ""
    path = Path(unquote(parts.path))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def for_terminal(answer: Answer) -> Answer:
    """The answer as the command line shows it: no control characters, a refusal that speaks of the indexed PDFs
    rather than a chat channel, and a "which one?" answer's numbered readings with how to ask for one here."""
    from pipelines.questions import CHOICE_HINT

    answer = for_people(answer)
    if answer.refused and CHANNEL_REFUSAL in answer.text:
        answer = answer.model_copy(update={"text": answer.text.replace(CHANNEL_REFUSAL, CLI_REFUSAL, 1)})
    if answer.kind == "clarify" and CHOICE_HINT in answer.text:
        answer = answer.model_copy(update={"text": answer.text.replace(CHOICE_HINT, CLI_CHOICE_HINT, 1)})
    return answer


def render_answer(answer: Answer, *, width: int | None = None) -> str:
    """The answer text, then each citation as a quote block with its ``file · p. N · section`` line (the file
    as its local path when it was indexed from one)."""
    answer = for_terminal(answer)
    if width is None:  # the terminal's width (COLUMNS, else 80 when not a terminal), at least 40
        width = max(40, shutil.get_terminal_size((100, 24)).columns)
    lines = [answer.text]
    for c in answer.citations:
        lines.append("")
        label = f"  [{c.n}] "  # [10] is wider than [9]: the bar and the source line follow the label's width
        quote_lines = []
        for raw in c.quote.splitlines() or [""]:
            quote_lines += textwrap.wrap(raw, width=width - len(label)) or [""]
        lines.append(f"{label}│ " + quote_lines[0])
        lines += [f"{' ' * len(label)}│ {ln}" for ln in quote_lines[1:]]
        where = c.file_label.replace(c.file, local_path(c.url) or c.file, 1)  # the path, and what a neutral name hides
        lines.append(f"{' ' * (len(label) + 2)}— {location_text(where, c.page_start, c.page_end, c.section)}")
    if answer.note:
        lines += ["", f"({answer.note})"]
    return "\n".join(lines)


def store_place(settings: Settings) -> str:
    """Where the indexed PDFs are looked for, for a person wondering why none are found (a relative
    ``CITEBOT_DATA_DIR``, the default ``./.citebot``, is another folder in another working directory)."""
    if settings.elasticsearch_url:
        return "Elasticsearch (CITEBOT_ELASTICSEARCH_URL)"
    return f"{settings.data_dir.resolve()} (CITEBOT_DATA_DIR)"


def store_exists(settings: Settings) -> bool:
    """Whether there is a store to read: a read-only command never creates the data directory to find it empty.
    True too when the data directory could not be made (a file in its path): opening the store says so, naming it."""
    if settings.elasticsearch_url or settings.sqlite_path.exists():
        return True
    for folder in (settings.data_dir, *settings.data_dir.resolve().parents):
        if folder.exists():
            return not folder.is_dir()
    return False


def nothing_indexed(scopes: list[str], settings: Settings) -> str:
    """What to do when the scopes hold no PDFs yet: where it looked, and the command that fills exactly these
    scopes."""
    scope_opt = "" if scopes == [LOCAL_SCOPE] else " --scope " + " --scope ".join(shlex.quote(s) for s in scopes)
    demo = " (or `citebot demo` for the sample PDFs)" if LOCAL_SCOPE in scopes else ""
    return (f"No PDFs are indexed in {', '.join(scopes)} yet, in {store_place(settings)}. Index some first: "
            f"`citebot ingest PATH{scope_opt}`{demo}.")


def run_ask(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.llm import LLMError
    from connectors.store_api import ScopeRequiredError, StoreError
    from pipelines.service import CitebotService

    problem = ""
    if not args.question.strip():
        problem = "the question is blank: ask one, e.g. citebot ask \"What is the notice period?\""
    elif args.k is not None and not 1 <= args.k <= 50:
        problem = "--k must be between 1 and 50"
    if problem:
        if args.json:
            print(json.dumps({"error": "invalid_arguments", "message": problem}))
        else:
            print(f"citebot ask: {problem}", file=sys.stderr)
        return 2
    scopes = args.scope or [LOCAL_SCOPE]
    try:
        service = CitebotService(settings) if store_exists(settings) else None
        if service is None or not service.list_documents(scopes):
            message = nothing_indexed(scopes, settings)
            if args.json:  # a script reading stdout gets an object it can branch on, as `docs --json` prints []
                print(json.dumps({"error": "no_documents", "message": message, "scopes": scopes}))
            else:
                print(message, file=sys.stderr)
            return 1
        from bot.cli.notices import announce_model_export

        announce_model_export(settings)
        mismatch = _embedding_mismatch(service, settings) if args.mode != "bm25" else ""
        if mismatch:  # dense retrieval would compare unlike vectors: an answer, but not one to trust
            if args.json:
                print(json.dumps({"error": "embedding_mismatch", "message": mismatch, "scopes": scopes}))
            else:
                print(f"citebot ask: {mismatch}", file=sys.stderr)
            return 2
        shown = _Streamed(sys.stdout) if not args.json and sys.stdout.isatty() else None
        answer = service.answer(args.question, scopes, mode=args.mode, k=args.k, show=shown)
    except (ScopeRequiredError, ValueError) as e:
        if args.json:
            print(json.dumps({"error": "invalid_arguments", "message": str(e)}))
        else:
            print(f"citebot ask: {e}", file=sys.stderr)
        return 2
    except StoreError as e:  # its message says which store and what to check
        print(f"citebot ask: {e}", file=sys.stderr)
        return 1
    except LLMError as e:
        print(f"citebot ask: could not answer ({type(e).__name__}); see the log above.", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(for_terminal(answer).model_dump(), indent=2, ensure_ascii=False))
    elif shown is not None and shown.text:
        shown.finish(for_terminal(answer).text, render_answer(answer))
    else:
        print(render_answer(answer))
    return 0


def _embedding_mismatch(service: Any, settings: Settings) -> str:
    """"" when the store's vectors can be compared with the question's, else what to do. Refused rather than
    answered: with unlike vectors the dense half of the search ranks passages by noise, so an answer would look
    as sure as any while quoting the wrong pages."""
    from connectors.embedding import embedding_fingerprint, previous_embedding_fingerprint, require_model
    from connectors.store_api import check_embeddings
    from connectors.stores import settings_for_store, stored_backend

    used = settings_for_store(settings, service.store)  # unset, the backend is the store's own: no mismatch
    model, dim = used.resolved_model_path, used.embedding_dim
    require_model(model)  # a missing model is that (its setting named), not a mismatch
    if check_embeddings(service.store, used.embedding_fingerprint, legacy=embedding_fingerprint(model, dim, "torch"),
                        previous=previous_embedding_fingerprint(model, dim, used.embedding_backend)) is None:
        return ""
    made_with, backend = stored_backend(service.store), used.embedding_backend
    if made_with and made_with != backend:
        cause = (f"were made with {made_with}, but CITEBOT_EMBEDDING_BACKEND={backend} makes vectors that cannot be "
                 "compared with them")
        fixes = f"to re-embed them with {backend}, unset CITEBOT_EMBEDDING_BACKEND to use the store's own"
    else:
        cause = "were made with another embedding model than CITEBOT_MODEL_PATH's"
        fixes = "to re-embed them with it, set CITEBOT_MODEL_PATH back"
    return (f"the indexed PDFs' vectors {cause}. Run `citebot reindex` {fixes}, or ask with --mode bm25 (words "
            "only, no vectors).")


class _Streamed:
    """On a terminal, an LLM answer's checked sentences are printed as they come (:mod:`pipelines.streaming`); the
    quotes follow once the answer is decided. Piped output is printed whole, once."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.text = ""

    def __call__(self, piece: str) -> None:
        self.text += piece
        self.out.write(piece)
        self.out.flush()

    def finish(self, answer_text: str, rendered: str) -> None:
        """The rest of ``rendered`` after the text already printed; all of it when the answer decided is not the
        one printed (the model's reply broke off and the PDFs are quoted instead)."""
        if rendered.startswith(self.text) and answer_text == self.text:
            print(rendered[len(self.text) :], file=self.out)
        else:
            print("\n\n" + rendered, file=self.out)
