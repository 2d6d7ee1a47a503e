"""The answer policy: given the passages and the extractive draft, refuse, quote, or ask the LLM.

:meth:`AnswerPolicy.decide` is the whole decision, in order:

1. refuse (``RefusalCheck``) when confidence is below the threshold or the extractive draft cites nothing;
2. without an LLM, the extractive answer, its citations validated (``CitationValidator``);
3. with one, the LLM's answer (``LLMAnswerer``), its citations validated; on failures one stricter retry
   naming them, then claims still unsupported dropped (:func:`keep_supported`). With triage
   (:mod:`pipelines.triage`, the asker's scopes given) the model first sees the outline and may fetch pages,
   sections, tables and figures; its answer is validated against the passages and what it fetched; an endpoint
   without tools gets the passages-only generation;
4. the model says the passages don't answer: a refusal; the model fails (``LLMError``) or nothing it says
   survives validation: the extractive answer, with a note saying why.

With ``show`` the model's reply is streamed and its sentences are handed to ``show`` as they pass the same checks
(:mod:`pipelines.streaming`); the decision above does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from haystack import Document

from connectors.log import get_logger
from connectors.tracing import span
from pipelines.components.citation_validator import CitationValidator
from pipelines.components.llm_answerer import LLMAnswerer, keep_supported
from pipelines.components.refusal import RefusalCheck, refusal_text
from pipelines.models import Answer, Citation, Turn, ValidationCounts
from pipelines.streaming import ShowText, preview

if TYPE_CHECKING:
    from pipelines.triage import Triage

log = get_logger("citebot.query")

NOTE_LLM_FAILED = "The language model was unavailable, so this answer quotes the PDFs directly."
NOTE_LLM_UNSUPPORTED = (
    "The language model's answer could not be matched to the PDFs, so this answer quotes them directly."
)
NOTE_DROPPED = "Some statements were left out because their quotes could not be found in the PDFs."


@dataclass(frozen=True)
class Draft:
    """The extractive answerer's draft: ``text`` with [n] markers, its ``citations`` as the answerer wrote them
    (``{"n", "chunk_id", "quote"}``, not yet validated), and how well the passages match the question
    (``max_cosine``: the best question–sentence cosine; ``coverage``: the share of question terms they hold)."""

    text: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    max_cosine: float = 0.0
    coverage: float = 0.0

    @classmethod
    def of(cls, out: dict[str, Any]) -> Draft:
        """From :class:`~pipelines.components.extractive_answerer.ExtractiveAnswerer`'s ``run`` output."""
        return cls(text=out["text"], citations=out["citations"], max_cosine=float(out.get("max_cosine", 0.0)),
                   coverage=float(out.get("coverage", 0.0)))


@dataclass(frozen=True)
class Signals:
    """How well the passages answer: the draft's ``max_cosine`` and ``coverage``, ``anchor_support`` and
    ``word_support`` (the question's specific terms and content words found in the scope), and
    ``confidence``, the number the refusal threshold applies to (1.0 for an explicit reference)."""

    max_cosine: float
    coverage: float
    anchor_support: float
    word_support: float
    confidence: float


@dataclass(frozen=True)
class Validated:
    """What citation validation kept (``citations``, quotes replaced by the exact source span), the raw
    citations it could not match (``failures``, named in the stricter retry), and its ``counts``."""

    citations: list[Citation]
    failures: list[dict[str, Any]]
    counts: ValidationCounts

    @classmethod
    def of(cls, out: dict[str, Any]) -> Validated:
        """From :class:`~pipelines.components.citation_validator.CitationValidator`'s ``run`` output."""
        return cls(citations=out["citations"], failures=out["failures"], counts=out["validation"])


class AnswerPolicy:
    """Refuse / extractive / LLM with one retry and an extractive fallback; stateless after construction."""

    def __init__(self, *, refusal: RefusalCheck, validator: CitationValidator, llm: LLMAnswerer | None,
                 triage: Triage | None = None) -> None:
        self.refusal = refusal
        self.validator = validator
        self.llm = llm
        self.triage = triage

    def decide(
        self, question: str, history: list[Turn], context: list[Document], ext: Draft, confidence: float,
        scopes: Sequence[str] = (), show: ShowText | None = None,
    ) -> Answer:
        """The answer to ``question`` from ``context`` (the passages) and ``ext`` (the extractive draft),
        ``confidence`` being the number the refusal threshold applies to; ``scopes``: the asker's, which every
        fetch of triage is limited to (none: no triage); ``show`` gets an LLM answer's checked sentences while the
        model writes them."""
        if self.refusal.run(relevance=confidence, documents=context)["refused"] or not ext.citations:
            return self._refusal(context)
        if self.llm is not None:
            return self._llm_answer(self.llm, question, context, history, ext, scopes, show=show)
        return self._extractive_answer(ext, context)

    def _validate(self, **kw: Any) -> Validated:
        """The citation validator, in a span of its own (its counts go on the answer's span)."""
        with span("validate"):
            return Validated.of(self.validator.run(**kw))

    @staticmethod
    def _generate(llm: LLMAnswerer, **kw: Any) -> dict[str, Any]:
        with span("llm", retried=bool(kw.get("failures"))):
            return llm.run(**kw)

    def _refusal(self, context: list[Document], note: str = "", mode: str = "extractive") -> Answer:
        text = refusal_text(context, max_pointers=self.refusal.max_pointers)
        return Answer(text=text, refused=True, mode=mode, note=note)  # type: ignore[arg-type]

    def _extractive_answer(self, ext: Draft, context: list[Document], note: str = "") -> Answer:
        v = self._validate(citations=ext.citations, documents=context)
        text, cits = ext.text, v.citations
        if v.failures:  # cannot happen for spans cut from the chunks themselves; never show one anyway
            text = text.split(" [", 1)[0] + " " + "".join(f"[{c.n}]" for c in cits) + ":"
        if not cits:
            return self._refusal(context, note)
        return Answer(text=text, citations=cits, mode="extractive", note=note, validation=v.counts)

    def _llm_answer(
        self, llm: LLMAnswerer, question: str, context: list[Document], history: list[Turn], ext: Draft,
        scopes: Sequence[str] = (), show: ShowText | None = None,
    ) -> Answer:
        from connectors.llm import LLMError

        try:
            draft = None
            if self.triage is not None and scopes:  # tool rounds first: the passages grow by what the model fetched
                # streamed, the rounds only gather and the answer is generated (and shown) after them
                found = self.triage.run(question, context, history, scopes, gather_only=show is not None)
                context, draft = found.documents, found.draft
                if draft is None and found.fetched:  # what the model went to fetch leads the passages it answers from
                    fetched = {id(d) for d in found.fetched}
                    context = [*found.fetched, *(d for d in context if id(d) not in fetched)]
            if draft is None:
                draft = self._generate(llm, question=question, documents=context, history=history,
                                       on_text=preview(self.validator, context, show, whole=True))
            if not draft["answerable"]:
                return self._refusal(context, mode="llm")
            v = self._validate(citations=draft["citations"], documents=context)
            counts = v.counts
            if v.failures:
                log.info("citations_retry", n_failures=len(v.failures))
                draft = self._generate(llm, question=question, documents=context, history=history,
                                       failures=v.failures, on_text=preview(self.validator, context, show,
                                                                             whole=False))
                if not draft["answerable"]:
                    return self._refusal(context, mode="llm")
                v = self._validate(citations=draft["citations"], documents=context, retried=True)
                counts = add_counts(counts, v.counts)
        except LLMError as e:
            log.warning("llm_fallback", error=type(e).__name__)
            return self._extractive_answer(ext, context, note=NOTE_LLM_FAILED)
        kept = keep_supported(draft["text"], v.citations, context)
        text, cits = kept.text, kept.citations
        if not cits or not text:
            fallback = self._extractive_answer(ext, context, note=NOTE_LLM_UNSUPPORTED)
            return fallback.model_copy(update={"validation": add_counts(counts, fallback.validation)})
        note = NOTE_DROPPED if v.failures or kept.dropped else ""
        return Answer(text=text, citations=cits, mode="llm", note=note, validation=counts)


def add_counts(a: ValidationCounts, b: ValidationCounts) -> ValidationCounts:
    return ValidationCounts(
        exact=a.exact + b.exact,
        normalised=a.normalised + b.normalised,
        fuzzy=a.fuzzy + b.fuzzy,
        unknown_chunk=a.unknown_chunk + b.unknown_chunk,
        unmatched=a.unmatched + b.unmatched,
        retried=a.retried or b.retried,
    )
