"""Question types beyond a look-up (issue 24): compare, summarise, "is there a Figure 1?", "which limit?",
max / min over a table, "what kind of document is this?", and multi-part questions with a part the PDFs
don't cover.

:class:`QuestionTypes` is asked first by :meth:`pipelines.service.CitebotService.answer`; each handler either
answers (an :class:`Answer` with its ``kind``) or returns ``None`` and the ordinary look-up path
(:meth:`pipelines.query.QueryEngine.answer`) answers as before. Without an LLM every answer here is extractive:
the text around the quotes is fixed wording, file names, section titles, table labels and cells, never invented
prose. With one, the model writes comparisons, summaries and each part of a multi-part question (the answer
policy's generation: quotes validated, one stricter retry, unsupported sentences dropped); the fixed lines that
say a document or a part has nothing stay. Either way every quote goes through :class:`CitationValidator`
against the chunk it cites before anyone sees it. A question that looks like a follow-up of earlier turns is
left to the look-up path, which rewrites it from the thread (only references and "what kind of document" are
answered here whatever came before).

The handlers, in the order they are tried (:func:`classify` decides which apply), a module a family
(``references``, ``documents``, ``tables``, ``choices``, ``parts``; what they share is ``steps``, the patterns
``kinds``):

* ``not_found``: the question names a table, figure, section, page or appendix that no PDF in scope has:
  that fact, and the labels that do exist; never unrelated passages;
* ``document_type``: "what kind of document is this": the type word as the title page prints it, quoted;
* ``summary``: "summarise <a document>": the opening sentence of each top-level section, pages shown
  (a page range or a section is summarised by the look-up path already);
* ``compare``: "compare X in A and B", "do both PDFs ...": retrieval within each document separately, one
  cited block per document, and a document that says nothing named as such;
* ``table``: "which year had the highest revenue": the max / min of a parsed table column, its row quoted;
* ``clarify``: a short "what is the <thing>?" whose best passages (those the look-up answer would read) state
  it in different sections: ask back, the readings numbered, each quoted, each a follow-up question in
  ``choices`` (the chat adapters draw them as buttons);
* ``partial`` / ``multi_part``: "what is X and what is Y?": each part answered on a line of its own, and a
  part the PDFs don't cover named as such.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pipelines.components.query_rewriter import looks_like_follow_up
from pipelines.models import Answer, RetrievalMode, Turn
from pipelines.questions import choices, documents, parts, references, tables
from pipelines.questions.choices import CHOICE_ARROW, CHOICE_HINT, MAX_CHOICES
from pipelines.questions.kinds import QuestionKind, classify, split_parts
from pipelines.questions.steps import Steps

if TYPE_CHECKING:
    from pipelines.query import QueryEngine

__all__ = ["CHOICE_ARROW", "CHOICE_HINT", "MAX_CHOICES", "QuestionKind", "QuestionTypes", "classify", "split_parts"]


class QuestionTypes:
    """Answers the question types of issue 24 over ``engine``'s store, or returns ``None`` for a look-up.

    Usage::

        qt = QuestionTypes(engine)
        answer = qt.answer("Compare the notice periods in both PDFs", ["slack:T1:C1"]) or engine.answer(...)

    :param engine: the warmed-up :class:`pipelines.query.QueryEngine` whose retrieval and extractive
        answerer the handlers use (per document, for a comparison).
    """

    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine
        self.steps = Steps(engine)

    # --- entry ---------------------------------------------------------------------------------
    def answer(
        self, question: str, scopes: list[str], history: Sequence[Turn] = (), *, mode: RetrievalMode = "hybrid",
        k: int | None = None,
    ) -> Answer | None:
        """The answer when ``question`` is one of the types here, else ``None`` (ask the look-up path)."""
        question = " ".join(question.split())
        if not question:
            return None
        k = k or self.engine.settings.answer_top_k
        kinds = classify(question)
        if history and looks_like_follow_up(question):
            # "and the handbook?" is rewritten from the thread by the look-up path; only what never leans on an
            # earlier turn is answered here. A question that stands alone is answered here with or without a
            # thread before it: a Teams personal chat is one long thread, every question after the first has one.
            kinds = [kd for kd in kinds if kd in (QuestionKind.REFERENCE, QuestionKind.DOCUMENT_TYPE)]
        steps = self.steps
        handlers: dict[QuestionKind, Callable[[], Answer | None]] = {
            QuestionKind.REFERENCE: lambda: references.not_found(steps, question, scopes),
            QuestionKind.DOCUMENT_TYPE: lambda: references.document_type(steps, question, scopes),
            QuestionKind.SUMMARY: lambda: documents.summary(steps, question, scopes),
            QuestionKind.COMPARE: lambda: documents.compare(steps, question, scopes, mode, k),
            QuestionKind.TABLE: lambda: tables.table_extreme(steps, question, scopes, mode),
            QuestionKind.SHORT: lambda: choices.which_one(steps, question, scopes, mode, k),
            QuestionKind.MULTI_PART: lambda: parts.partial(steps, question, scopes, mode, k),
        }
        for kind in kinds:
            handler = handlers.get(kind)
            out = handler() if handler else None
            if out is not None:  # its log line is the service's, as every answer's
                return out
        return None

    @staticmethod
    def resolve_choice(question: str, history: Sequence[Turn]) -> str | None:
        """A reply "2" to a "which one?" answer: the second reading's question (:func:`choices.resolve_choice`)."""
        return choices.resolve_choice(question, history)
