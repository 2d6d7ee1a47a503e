"""The one chooser of how a question is answered: :class:`Answerer` tries the answer kinds in a declared order, the
first that answers wins, the ordinary look-up last (it always answers), as Bolt tries its listeners' matchers.

The order, most specific first (:data:`Answerer.order` names it; each kind's code is in :mod:`pipelines.questions`
or here):

1. ``reference``: the question names a table, figure, section, page or appendix no PDF in scope has;
2. ``document_type``: "what kind of document is this";
3. ``summary``: "summarise <a document>";
4. ``compare``: "compare X in A and B";
5. ``table``: the max / min of a table column;
6. ``computed``: a metric no statement prints (a margin, a ratio, growth, an average), computed from quoted rows,
   the arithmetic recomputed from the validated quotes before it is shown;
7. ``figure``: a statement line item's figure, at the row and the column (the period asked), with its unit;
8. ``period``: the question names a year no PDF in scope mentions (after ``figure``, whose "this filing has no
   2030 figure" quotes the periods its table does report);
9. ``short``: a short "what is the <thing>?" with several readings: ask which;
10. ``multi_part``: "what is X and what is Y?", each part on a line of its own;
11. ``tools``: with an LLM that may call tools, the look-up whose last step lets the model fetch pages, sections,
   tables and figures of the asker's PDFs first (:mod:`pipelines.triage`);
12. ``lookup``: the look-up (:meth:`pipelines.query.QueryEngine.answer`).

A kind applies when :func:`pipelines.questions.kinds.classify` says the question may be of it (``tools`` and
``lookup`` always may); it answers, or returns ``None`` and the next kind is tried. A question that looks like a
follow-up of earlier turns is left to the look-up, which rewrites it from the thread (only ``reference`` and
``document_type`` answer it here whatever came before). A new answer kind is a function ``(Question) -> Answer |
None``, a :class:`~pipelines.questions.kinds.QuestionKind` member with its pattern in ``classify``, its place
in :meth:`Answerer.order`, and the ``Answer.kind`` it gives in :data:`pipelines.models.AnswerKind`
(``tests/test_where_to_add.py`` checks the four agree).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from connectors.log import get_logger
from pipelines.answer_policy import NOTE_LLM_FAILED, Decision
from pipelines.components.query_rewriter import looks_like_follow_up
from pipelines.models import Answer, RetrievalMode, Turn
from pipelines.questions import (
    choices,
    computed,
    documents,
    drivers,
    figures,
    geographies,
    parts,
    references,
    row_extremes,
    tables,
)
from pipelines.questions.kinds import Question, QuestionKind, classify
from pipelines.questions.steps import Steps

if TYPE_CHECKING:
    from pipelines.query import QueryEngine
    from pipelines.streaming import ShowText

log = get_logger(__name__)

# kinds that never lean on an earlier turn: answered here even when the question looks like a follow-up
_STANDALONE = frozenset({QuestionKind.REFERENCE, QuestionKind.DOCUMENT_TYPE})


AnswerKindFn = Callable[[Question], Answer | None]


class Answerer:
    """Answers a question over ``engine``'s store by the first answer kind that answers; built once per service,
    safe to share between threads.

    Usage::

        answerer = Answerer(engine)
        answer = answerer.answer("Compare the notice periods in both PDFs", ["slack:T1:C1"])

    :param engine: the :class:`pipelines.query.QueryEngine` whose public steps every kind is built from.
    """

    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine
        self.steps = Steps(engine)

    def order(self) -> list[tuple[QuestionKind, AnswerKindFn]]:
        """The answer kinds, in the order they are tried (see the module's docstring)."""
        steps = self.steps
        return [
            (QuestionKind.REFERENCE, lambda q: references.not_found(steps, q.text, q.scopes)),
            (QuestionKind.DOCUMENT_TYPE, lambda q: references.document_type(steps, q.text, q.scopes)),
            (QuestionKind.SUMMARY, lambda q: documents.summary(steps, q.text, q.scopes)),
            (QuestionKind.COMPARE, lambda q: documents.compare(steps, q.text, q.scopes, q.mode, q.k)),
            (QuestionKind.TABLE, lambda q: row_extremes.row_extreme(steps, q.text, q.scopes, q.mode)
             or tables.table_extreme(steps, q.text, q.scopes, q.mode)),
            (QuestionKind.GEOGRAPHIES, lambda q: geographies.geographies(steps, q)),
            (QuestionKind.DRIVERS, lambda q: drivers.metric_drivers(steps, q)),
            (QuestionKind.COMPUTED, lambda q: computed.computed_metric(steps, q)),
            (QuestionKind.FIGURE, lambda q: figures.line_item_figure(steps, q)),
            (QuestionKind.PERIOD, lambda q: references.absent_period(steps, q.text, q.scopes)),
            (QuestionKind.SHORT, lambda q: choices.which_one(steps, q.text, q.scopes, q.mode, q.k)),
            (QuestionKind.MULTI_PART, lambda q: parts.partial(steps, q.text, q.scopes, q.mode, q.k)),
            (QuestionKind.TOOLS, self.with_tools),
            (QuestionKind.LOOKUP, self.look_up),
        ]

    def parse(self, question: str, scopes: list[str], history: Sequence[Turn] = (), *,
              mode: RetrievalMode | str = RetrievalMode.HYBRID, k: int | None = None,
              show: ShowText | None = None) -> Question:
        """``question`` parsed once for every kind: a reply "2" to a "which one?" answer becomes that reading's
        question, asked afresh."""
        chosen = choices.resolve_choice(question, history)
        if chosen is not None:
            question, history = chosen, ()
        text = " ".join(question.split())
        kinds = set(classify(text)) if text else {QuestionKind.LOOKUP}
        if history and looks_like_follow_up(text):
            kinds = {kd for kd in kinds if kd in _STANDALONE} | {QuestionKind.LOOKUP}
        kinds.add(QuestionKind.TOOLS)
        return Question(text=text, scopes=scopes, history=tuple(history), mode=RetrievalMode.from_str(mode),
                        k=k or self.engine.settings.answer_top_k, show=show, kinds=frozenset(kinds))

    def answer(self, question: str, scopes: list[str], history: Sequence[Turn] = (), *,
               mode: RetrievalMode | str = RetrievalMode.HYBRID, k: int | None = None,
               show: ShowText | None = None) -> Answer:
        """The answer of the first kind in :meth:`order` that applies to ``question`` and answers."""
        self.engine.warm_up()
        q = self.parse(question, scopes, history, mode=mode, k=k, show=show)
        for kind, answer in self.order():
            if kind in q.kinds and q.text:
                out = answer(q)
                if out is not None:  # its log line is the service's, as every answer's
                    return out
        return self.look_up(q)  # a blank question: the look-up says what is wrong

    # --- the two kinds every question may be ---------------------------------------------------------
    def look_up(self, q: Question) -> Answer:
        """The ordinary look-up: retrieve, draft, signals, the answer policy."""
        return self.engine.answer(q.text, q.scopes, q.history, mode=q.mode, k=q.k, show=q.show)

    def with_tools(self, q: Question) -> Answer | None:
        """With an LLM that may call tools, the look-up whose last step lets the model read the asker's PDFs
        first (:class:`pipelines.triage.Triage`: outline, fetch a page, section, table or figure, search; every
        fetch within ``q.scopes``); ``None`` without one."""
        if self.engine.triage is None or self.engine.llm is None:
            return None
        return self.engine.answer(q.text, q.scopes, q.history, mode=q.mode, k=q.k, show=q.show,
                                  decide=self._decide_with_tools)

    def _decide_with_tools(self, d: Decision) -> Answer:
        from connectors.llm import LLMError

        policy, triage = self.engine.policy, self.engine.triage
        if triage is None or not d.scopes or policy.refuses(d):
            return policy.decide(d)
        try:  # streamed, the rounds only gather and the answer is generated (and shown) after them
            found = triage.run(d.question, d.context, d.history, d.scopes, gather_only=d.show is not None)
        except LLMError as e:
            log.warning("llm_fallback", error=type(e).__name__)
            return policy.extractive(d.draft, d.context, note=NOTE_LLM_FAILED)
        context = found.documents
        if found.draft is None and found.fetched:  # what the model went to fetch leads the passages it answers from
            fetched = {id(x) for x in found.fetched}
            context = [*found.fetched, *(x for x in context if id(x) not in fetched)]
        return policy.generate(d.question, context, d.history, d.draft, show=d.show, written=found.draft)
