"""The answer policy: given the passages and the extractive draft, refuse, quote, or ask the LLM.

:meth:`AnswerPolicy.decide` is the whole decision, in order:

1. refuse (``RefusalCheck``) when confidence is below the threshold or the extractive draft cites nothing;
2. without an LLM, the extractive answer, its citations validated (``CitationValidator``);
3. with one, :meth:`AnswerPolicy.generate`: the LLM's answer (``LLMAnswerer``), its citations validated; on
   failures one stricter retry naming them, then claims still unsupported dropped (:func:`keep_supported`). The
   answer kind with tools (:mod:`pipelines.answer_kinds`, over :mod:`pipelines.triage`) hands ``generate`` the
   passages the model fetched and, when it answered inside its tool loop, that draft;
4. the model says the passages don't answer: a refusal; the model fails (``LLMError``) or nothing it says
   survives validation: the extractive answer, with a note saying why.

With ``show`` the model's reply is streamed and its sentences are handed to ``show`` as they pass the same checks
(:mod:`pipelines.streaming`); the decision above does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from haystack import Document

from connectors.log import get_logger
from connectors.tracing import span
from pipelines.components.citation_validator import CitationValidator
from pipelines.components.llm_answerer import LLMAnswerer, keep_supported
from pipelines.components.refusal import RefusalCheck, refusal_text
from pipelines.models import Answer, Citation, RawCitation, Turn, ValidationCounts
from pipelines.streaming import ShowText, preview

log = get_logger(__name__)

NOTE_LLM_FAILED = "The language model was unavailable, so this answer quotes the PDFs directly."
NOTE_LLM_UNSUPPORTED = (
    "The language model's answer could not be matched to the PDFs, so this answer quotes them directly."
)
NOTE_DROPPED = "Some statements were left out because their quotes could not be found in the PDFs."


@dataclass(frozen=True)
class Draft:
    """The extractive answerer's draft: ``text`` with [n] markers, its ``citations`` as the answerer wrote them
    (:class:`RawCitation`, not yet validated), and how well the passages match the question
    (``max_cosine``: the best question–sentence cosine; ``coverage``: the share of question terms they hold)."""

    text: str
    citations: list[RawCitation] = field(default_factory=list)
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


@dataclass(frozen=True)
class Decision:
    """What the look-up hands its last step: the ``question``, the thread's ``history``, the passages
    (``context``), the extractive ``draft``, the ``confidence`` the refusal threshold applies to, the asker's
    ``scopes`` (every fetch of an answer kind with tools stays within them) and ``show``, which gets an LLM
    answer's checked sentences while the model writes them."""

    question: str
    history: list[Turn]
    context: list[Document]
    draft: Draft
    confidence: float
    scopes: Sequence[str] = ()
    show: ShowText | None = None


Decide = Callable[[Decision], Answer]
"""The look-up's last step: :meth:`AnswerPolicy.decide`, or an answer kind's own (the LLM with tools)."""


class AnswerPolicy:
    """Refuse / extractive / LLM with one retry and an extractive fallback; stateless after construction."""

    def __init__(self, *, refusal: RefusalCheck, validator: CitationValidator, llm: LLMAnswerer | None) -> None:
        self.refusal = refusal
        self.validator = validator
        self.llm = llm

    def refuses(self, d: Decision) -> bool:
        """Whether ``d`` is refused before anything is written: confidence under the threshold, or an extractive
        draft that quotes nothing."""
        return bool(self.refusal.run(relevance=d.confidence, documents=d.context)["refused"]) or not d.draft.citations

    def decide(self, d: Decision) -> Answer:
        """The answer to ``d.question`` from its passages and extractive draft: a refusal, the LLM's answer when
        one is configured (:meth:`generate`), else the extractive answer."""
        if self.refuses(d):
            return self.refusal_answer(d.context)
        if self.llm is not None:
            return self.generate(d.question, d.context, d.history, d.draft, show=d.show)
        return self.extractive(d.draft, d.context)

    def _validate(self, **kw: Any) -> Validated:
        """The citation validator, in a span of its own (its counts go on the answer's span)."""
        with span("validate"):
            return Validated.of(self.validator.run(**kw))

    @staticmethod
    def _generate(llm: LLMAnswerer, **kw: Any) -> dict[str, Any]:
        with span("llm", retried=bool(kw.get("failures"))):
            return llm.run(**kw)

    def refusal_answer(self, context: list[Document], note: str = "", mode: str = "extractive") -> Answer:
        """The refusal, pointing at the closest passages."""
        text = refusal_text(context, max_pointers=self.refusal.max_pointers)
        return Answer(text=text, refused=True, mode=mode, note=note)  # type: ignore[arg-type]

    def extractive(self, ext: Draft, context: list[Document], note: str = "") -> Answer:
        """The extractive draft as the answer, its quotes validated (a refusal when none holds)."""
        v = self._validate(citations=ext.citations, documents=context)
        text, cits = ext.text, v.citations
        if v.failures:  # cannot happen for spans cut from the chunks themselves; never show one anyway
            text = text.split(" [", 1)[0] + " " + "".join(f"[{c.n}]" for c in cits) + ":"
        if not cits:
            return self.refusal_answer(context, note)
        return Answer(text=text, citations=cits, mode="extractive", note=note, validation=v.counts)

    def generate(
        self, question: str, context: list[Document], history: list[Turn], ext: Draft, *,
        show: ShowText | None = None, written: dict[str, Any] | None = None,
    ) -> Answer:
        """The LLM's answer from ``context``: its citations validated, one stricter retry naming the failures,
        claims still unsupported dropped; the model failing, or nothing it says surviving, gives the extractive
        ``ext`` with a note. ``written``: the model's draft when it already answered (inside a tool loop).
        Needs an LLM (``self.llm``)."""
        from connectors.llm import LLMError

        llm = self.llm
        if llm is None:
            raise ValueError("generate needs an LLM; decide() answers extractively without one")
        try:
            draft = written
            if draft is None:
                draft = self._generate(llm, question=question, documents=context, history=history,
                                       on_text=preview(self.validator, context, show, whole=True))
            if not draft["answerable"]:
                return self.refusal_answer(context, mode="llm")
            v = self._validate(citations=draft["citations"], documents=context)
            counts = v.counts
            if v.failures:
                log.info("citations_retry", n_failures=len(v.failures))
                draft = self._generate(llm, question=question, documents=context, history=history,
                                       failures=v.failures, on_text=preview(self.validator, context, show,
                                                                             whole=False))
                if not draft["answerable"]:
                    return self.refusal_answer(context, mode="llm")
                v = self._validate(citations=draft["citations"], documents=context, retried=True)
                counts = add_counts(counts, v.counts)
        except LLMError as e:
            log.warning("llm_fallback", error=type(e).__name__)
            return self.extractive(ext, context, note=NOTE_LLM_FAILED)
        kept = keep_supported(draft["text"], v.citations, context)
        text, cits = kept.text, kept.citations
        if not cits or not text:
            fallback = self.extractive(ext, context, note=NOTE_LLM_UNSUPPORTED)
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
