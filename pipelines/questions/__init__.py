"""Question types beyond a look-up: compare, summarise, "is there a Figure 1?", "which limit?",
max / min over a table, "what kind of document is this?", and multi-part questions with a part the PDFs
don't cover.

Each is an answer kind of :class:`pipelines.answerer.Answerer`, which tries them in its declared order before the
ordinary look-up (:meth:`pipelines.query.QueryEngine.answer`); each handler either answers (an :class:`Answer`
with its ``kind``) or returns ``None`` and the next kind is tried. Without an LLM every answer here is extractive:
the text around the quotes is fixed wording, file names, section titles, table labels and cells, never invented
prose. With one, the model writes comparisons, summaries and each part of a multi-part question (the answer
policy's generation: quotes validated, one stricter retry, unsupported sentences dropped); the fixed lines that
say a document or a part has nothing stay. Either way every quote goes through :class:`CitationValidator`
against the chunk it cites before anyone sees it. A question that looks like a follow-up of earlier turns is
left to the look-up path, which rewrites it from the thread (only references and "what kind of document" are
answered here whatever came before).

The handlers, in the order :class:`~pipelines.answerer.Answerer` tries them (:func:`classify` decides which
apply), a module a family (``references``, ``documents``, ``row_extremes``, ``tables``, ``choices``, ``parts``;
what they share is ``steps``, the patterns ``kinds``):

* ``not_found``: the question names a table, figure, section, page or appendix that no PDF in scope has:
  that fact, and the labels that do exist; never unrelated passages;
* ``document_type``: "what kind of document is this": the type word as the title page prints it, quoted;
* ``summary``: "summarise <a document>": the opening sentence of each top-level section, pages shown
  (a page range or a section is summarised by the look-up path already);
* ``compare``: "compare X in A and B", "do both PDFs ...": retrieval within each document separately, one
  cited block per document, and a document that says nothing named as such; "compare X and Y" naming no two
  documents: each topic retrieved on its own, one cited block per topic;
* ``table``: "which region had the highest EBITDAR in FY2022", "the largest liability on the balance sheet",
  "among operations, investing and financing, which brought in the most cash": the max / min of a statement's
  rows in the period's column, the table found by the title or section naming the measure, or the options the
  question lists (``row_extremes``); else "which year had the highest revenue", "which product line has the longest
  refund window": the max / min of the parsed table column whose header matches the measure (cells read with their
  units), the row named by its label cell and quoted under its header (``tables``);
* ``clarify``: a short "what is the <thing>?" whose best passages (those the look-up answer would read) state
  it in different sections: ask back, the readings numbered, each quoted, each a follow-up question in
  ``choices`` (the chat adapters draw them as buttons);
* ``partial`` / ``multi_part``: "what is X and what is Y?": each part answered on a line of its own, and a
  part the PDFs don't cover named as such.
"""

from __future__ import annotations

from pipelines.questions.choices import CHOICE_ARROW, CHOICE_HINT, MAX_CHOICES, resolve_choice
from pipelines.questions.kinds import QuestionKind, classify, split_parts

__all__ = ["CHOICE_ARROW", "CHOICE_HINT", "MAX_CHOICES", "QuestionKind", "classify", "resolve_choice", "split_parts"]
