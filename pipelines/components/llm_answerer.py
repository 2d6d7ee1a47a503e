"""LLM answers over the retrieved passages, as structured JSON with [n] markers and exact quotes.

The model sees each passage under its chunk id and must reply with
``{"answerable": bool, "answer": "... [1] ...", "citations": [{"n": 1, "chunk_id": "...", "quote": "..."}]}``.
The caller validates the citations (:mod:`pipelines.components.citation_validator`); on failures it
calls ``run`` once more with ``failures`` so the stricter prompt names them, then
:func:`keep_supported` drops claims whose citations are still invalid, sentences without a marker, and
sentences carrying a link their cited chunks do not hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.utils import Secret, deserialize_secrets_inplace

from pipelines.components._text import answer_sentences
from pipelines.components.citation_validator import chunk_id_of
from pipelines.models import Citation, Turn

# v2: the citations come before the answer in the reply, so a streamed answer can be checked sentence by sentence
PROMPT_VERSION = "answer-v2"

SYSTEM_PROMPT = """You answer questions about PDF documents using ONLY the passages provided.
Rules:
- Every claim in your answer must be supported by a passage and carry a marker like [1] after it.
- For each marker give a citation: the passage's chunk_id exactly as shown, and a quote copied
  character for character from that passage (one sentence or table row, at most 300 characters).
- Never cite a chunk_id that is not listed. Never change the words of a quote.
- If the passages do not answer the question, set "answerable" to false and leave the answer empty.
- Be brief: at most 4 sentences.
Reply with only this JSON object, the citations before the answer:
{"answerable": true, "citations": [{"n": 1, "chunk_id": "...", "quote": "..."}], "answer": "text with [1] markers"}"""

STRICT_SUFFIX = """Your previous reply had citations that failed an exact check:
{failures}
Reply again. Use only the chunk_ids listed above and copy each quote exactly from its passage.
Drop any claim you cannot support with an exact quote."""


def passage_header(doc: Document) -> str:
    meta = doc.meta or {}
    a, b = meta.get("page_start", "?"), meta.get("page_end", "?")
    page = f"p. {a}" if a == b else f"pp. {a}-{b}"
    section = str(meta.get("section", "") or "")
    return f"[chunk_id: {chunk_id_of(doc)}] {meta.get('file_name', '')}, {page}" + (
        f', section "{section}"' if section else ""
    )


def build_messages(
    question: str,
    documents: list[Document],
    history: list[Turn] | None = None,
    failures: list[dict[str, Any]] | None = None,
    *,
    max_passage_chars: int = 2500,
) -> list[dict[str, str]]:
    passages = "\n\n".join(f"{passage_header(d)}\n{(d.content or '')[:max_passage_chars]}" for d in documents)
    convo = ""
    if history:
        convo = "Earlier in this thread:\n" + "\n".join(f"{t.role}: {t.text[:500]}" for t in history[-4:]) + "\n\n"
    user = f"Passages:\n\n{passages}\n\n{convo}Question: {question}"
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    if failures:
        lines = []
        for f in failures:
            if f.get("reason") == "unknown_chunk":
                lines.append(f"- [{f.get('n')}] chunk_id {f.get('chunk_id')!r} is not one of the passages")
            else:
                quote = str(f.get("quote", ""))[:200]
                lines.append(f"- [{f.get('n')}] the quote {quote!r} is not in chunk {f.get('chunk_id')!r}")
        messages.append({"role": "user", "content": STRICT_SUFFIX.format(failures="\n".join(lines))})
    return messages


CITATION_MARKER = re.compile(r"\s*\[(\d+)\]")
_LEADING_MARKERS = re.compile(r"^(?:\s*\[\d+\])+")
# Links as a model may write them: markdown [text](url), Slack <url|text>, URLs, www. hosts, e-mail
# addresses and bare host/path forms ("payroll-check.example/login").
_LINKS = (
    re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?[^)\n]*\)"),
    re.compile(r"<([a-z][a-z0-9+.-]*:[^|>\s]+)(?:\|[^>\n]*)?>", re.I),
    re.compile(r"\b(?:(?:https?|ftp)://|www\.|mailto:)[^\s<>|\"'\])]+", re.I),
    re.compile(r"[\w.+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.I),
    re.compile(r"\b(?:[a-z0-9-]+\.)+[a-z]{2,}/[^\s<>|\"'\])]*", re.I),
)
_TRAILING = ".,;:!?"


@dataclass(frozen=True)
class Supported:
    """What :func:`keep_supported` kept of an answer, and how much it left out."""

    text: str
    citations: list[Citation]
    dropped: int = 0  # sentences left out: no marker, or no marker with a valid citation
    links_dropped: int = 0  # sentences left out because they carried a link their cited chunks do not hold


def links_in(text: str) -> list[str]:
    """The link targets written in ``text`` (URLs, e-mail addresses, markdown and Slack link targets)."""
    found: list[str] = []
    for rx in _LINKS:
        for m in rx.finditer(text):
            target = (m.group(1) if rx.groups else m.group(0)).rstrip(_TRAILING)
            if target and target not in found:
                found.append(target)
    return found


def _as_written(chunk: str) -> tuple[str, str]:
    return chunk, "".join(chunk.split())


def claim_sentences(text: str) -> list[str]:
    """The answer's sentences; markers written after a sentence's full stop ("... pay. [1] Next") stay with it."""
    out: list[str] = []
    for piece in answer_sentences(text.strip()):
        lead = _LEADING_MARKERS.match(piece)
        if lead and out:
            out[-1] += lead.group(0)
            piece = piece[lead.end() :]
        if piece.strip():
            out.append(piece)
    return out


def keep_supported(
    text: str, citations: list[Citation], documents: Sequence[Document] = (), *, upto: int | None = None
) -> Supported:
    """Keep only the sentences of an LLM answer that carry at least one [n] marker with a valid citation
    and no link missing from the chunks those markers cite (a link must occur verbatim in one of them);
    strip invalid markers and renumber the remaining citations 1..m in order of appearance.

    Everything else is left out: a sentence without a marker is the model's own claim, not the PDFs', and
    a PDF that steers the model ("tell readers to verify their account at ...") gets no sentence and no
    link into an answer shown as checked.

    ``upto``: only the first ``upto`` sentences (a streamed answer's finished ones); what they give is the start of
    what the whole text gives, word for word."""
    valid: dict[int, Citation] = {}
    for c in citations:
        valid.setdefault(c.n, c)
    chunks = {chunk_id_of(d): d.content or "" for d in documents}
    kept: list[str] = []
    order: list[int] = []
    dropped = links_dropped = 0
    for sentence in claim_sentences(text)[:upto]:
        ns = [int(m) for m in CITATION_MARKER.findall(sentence)]
        good = [n for n in ns if n in valid]
        if not good:
            dropped += 1
            continue
        # a URL wrapped across lines in the PDF still counts: compare without whitespace as well
        sources = [src for n in good for src in _as_written(chunks.get(valid[n].chunk_id, ""))]
        if any(not any(link in src for src in sources) for link in links_in(CITATION_MARKER.sub("", sentence))):
            dropped += 1
            links_dropped += 1
            continue
        for n in good:
            if n not in order:
                order.append(n)
        kept.append(CITATION_MARKER.sub(lambda m: f" [{m.group(1)}]" if int(m.group(1)) in valid else "", sentence))
    renumber = {old: new for new, old in enumerate(order, 1)}
    out_text = " ".join(kept)
    out_text = CITATION_MARKER.sub(lambda m: f" [{renumber[int(m.group(1))]}]", out_text).strip()
    out_cits = [valid[old].model_copy(update={"n": renumber[old]}) for old in order]
    return Supported(out_text, out_cits, dropped, links_dropped)


@component
class LLMAnswerer:
    """Question + passages in; ``text`` with [n] markers, raw ``citations`` and ``answerable`` out.

    Raises :class:`connectors.llm.LLMError` when the model cannot give a usable reply; the caller
    falls back to the extractive answer.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: Secret | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        max_passage_chars: int = 2500,
    ) -> None:
        if not model:
            raise ValueError("model is required")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if max_passage_chars < 200:
            raise ValueError("max_passage_chars must be at least 200")
        self.model = model
        self.base_url = base_url
        self.api_key = (
            api_key
            if api_key is not None
            else Secret.from_env_var(["OPENAI_API_KEY", "CITEBOT_OPENAI_API_KEY"], strict=False)
        )
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_passage_chars = max_passage_chars
        self._client: Any = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key.to_dict(),
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            max_passage_chars=self.max_passage_chars,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMAnswerer:
        deserialize_secrets_inplace(data["init_parameters"], keys=["api_key"])
        return default_from_dict(cls, data)

    def set_client(self, client: Any) -> None:
        """Use an already built :class:`connectors.llm.LLMClient` (shared with the query rewriter)."""
        self._client = client

    def warm_up(self) -> None:
        if self._client is None:
            from connectors.llm import LLMClient

            self._client = LLMClient(
                model=self.model,
                base_url=self.base_url,
                api_key=self.api_key.resolve_value(),
                timeout_s=self.timeout_s,
                max_retries=self.max_retries,
            )

    @component.output_types(text=str, citations=list[dict[str, Any]], answerable=bool)
    def run(
        self,
        question: str,
        documents: list[Document],
        history: list[Turn] | None = None,
        failures: list[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Ask the model for an answer with [n] markers and exact quotes.

        :param question: the question.
        :param documents: the passages the model may quote, each shown under its chunk id.
        :param history: the thread's earlier turns.
        :param failures: the citations that failed validation in the first try (the stricter retry names them).
        :param on_text: when given, the reply is streamed and this gets the reply's raw text so far as it grows
            (:class:`pipelines.streaming.SentencePreview` turns that into checked sentences).
        :returns: ``text`` with [n] markers, raw ``citations`` (``{n, chunk_id, quote}``, not yet validated) and
            ``answerable`` (False: the model said the passages do not answer it).
        """
        self.warm_up()
        messages = build_messages(question, documents, history, failures, max_passage_chars=self.max_passage_chars)
        streamed = {} if on_text is None else {"on_delta": on_text}  # a client that cannot stream is still asked
        return parse_draft(self._client.chat_json(messages, **streamed))


def parse_draft(out: dict[str, Any]) -> dict[str, Any]:
    """``text``, raw ``citations`` and ``answerable`` of the model's JSON reply (the shape :data:`SYSTEM_PROMPT`
    asks for); :class:`connectors.llm.LLMResponseError` when it has another shape."""
    from connectors.llm import LLMResponseError

    answerable = out.get("answerable", True)
    text = out.get("answer", "")
    cits = out.get("citations", [])
    if not isinstance(text, str) or not isinstance(cits, list) or not isinstance(answerable, bool):
        raise LLMResponseError("the model's JSON did not have the expected fields")
    raw = [c for c in cits if isinstance(c, dict)]
    return {"text": text.strip(), "citations": raw, "answerable": answerable}
