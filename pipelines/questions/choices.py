""""Which one?": a short "what is the <thing>?" whose best passages state it in different sections is asked back,
the readings numbered, each quoted, each a follow-up question in ``choices`` (:func:`which_one`; the chat adapters
draw them as buttons); a reply "2" in the thread asks the second (:func:`resolve_choice`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from haystack import Document

from pipelines.answer_policy import Draft
from pipelines.components._text import STOPWORDS, sentence_spans
from pipelines.components.extractive_answerer import is_heading_line, skip_heading_lines
from pipelines.components.question_analyzer import word_forms
from pipelines.models import Answer, RetrievalMode, Turn
from pipelines.questions.kinds import SHORT_DEFINITE
from pipelines.questions.steps import AnswerDraft, Steps, content_words, doc_filter, leaf, page_text, top

MAX_DOCS_ASKED = 6  # PDFs in scope each looked in for a reading of their own; more is a library, not a choice
MAX_CHOICES = 4  # readings offered by a "which one?" (a Slack actions block holds 25 buttons, a Teams card 6)
CHOICE_ARROW = "→ ask"
CHOICE_QUOTE_WORDS = 7  # a reading's follow-up question names it by its opening words
CHOICE_HINT = "Reply with the number (in this thread), or ask again naming the one you mean."
_CHOICE_REPLY = re.compile(r"\s*(?:#|no\.?\s*|number\s*|option\s*)?(\d)\s*[.)]?\s*", re.I)
# What a short question's thing may be called where the PDFs state one ("the limit": "up to 20 hours").
SYNONYMS: dict[str, tuple[str, ...]] = {
    "limit": ("up to", "maximum", "at most", "no more than", "cap", "capped"),
    "cap": ("up to", "maximum", "at most", "limit", "limited"),
    "maximum": ("up to", "at most", "no more than", "limit"),
    "deadline": ("within", "no later than", "at least"),
    "fee": ("fees", "charge", "price"),
    "rate": ("per hour", "per mile", "per day", "per night"),
    "period": ("days", "weeks", "months"),
    "budget": ("allowance",),
    "allowance": ("budget",),
}


def _opening(sentence: str, words: int = CHOICE_QUOTE_WORDS) -> str:
    """The first ``words`` words of ``sentence`` (verbatim, no quotation marks), to name a reading by."""
    return " ".join(re.sub(r"[“”‘’\"]", "", sentence).split()[:words])


def _states(thing: str) -> Callable[[str], int] | None:
    """How a sentence states ``thing`` ("limit", "notice period"): 2 when it names it (each of its words in some
    form), 1 when it states it by a phrase of :data:`SYNONYMS` for its last word ("up to" for a limit; its other
    words still named: a notice period is no reading of "12 weeks of absence"), 0 when not at all. ``None`` when
    the thing has no content word."""
    words = [w for w in re.findall(r"[a-z]+", thing.lower()) if w not in STOPWORDS]
    if not words:
        return None

    def any_of(options: Sequence[str]) -> re.Pattern[str]:
        return re.compile(r"\b(?:" + "|".join(re.escape(o) for o in sorted(set(options), key=len, reverse=True))
                          + r")\b", re.I)

    *modifiers, head = words
    named = [any_of(word_forms(w)) for w in modifiers]
    head_named = any_of(word_forms(head))
    head_phrased = any_of(SYNONYMS[head]) if SYNONYMS.get(head) else None

    def how(sentence: str) -> int:
        if not all(p.search(sentence) for p in named):
            return 0
        if head_named.search(sentence):
            return 2
        return 1 if head_phrased is not None and head_phrased.search(sentence) else 0

    return how


def which_one(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode, k: int) -> Answer | None:
    """A short "what is the limit?" whose best passages answer different readings: ask which.

    The readings are looked for where the look-up answer would be built from: the ``k`` passages retrieval
    ranks first. A passage is a reading when one of its sentences states the thing (:func:`_states`: the
    thing's last word in some form or in a phrase :data:`SYNONYMS` says states it, "up to 160 pounds" for a
    limit, and every other word of the thing, so "the notice period" needs "notice") and it would be
    answered at all (its best question–sentence cosine clears the refusal threshold), one reading per
    section. Two or more: the look-up answer would pick one of them by how close its words are to a
    one-word question, which favours a passage that says "limited" over one that says "up to" (0.35 against
    0.07 for the hotel limit); so the readings are offered in retrieval order instead, each quoted."""
    m = SHORT_DEFINITE.match(question)
    if not m or len(content_words(m.group(1))) > 2:
        return None
    thing = m.group(1)
    states = _states(thing)
    if states is None:
        return None
    e = steps.engine
    hits, embedding = e.search(question, scopes, mode=mode)
    readings: list[tuple[Document, str]] = []
    seen_sections: set[tuple[str, str]] = set()

    def add(h: Document) -> bool:
        """``h`` as a reading when a sentence of it states the thing and the look-up would answer from it."""
        key = (str((h.meta or {}).get("doc_id", "")), top(str((h.meta or {}).get("section", "") or "")))
        content = h.content or ""
        spans = [(skip_heading_lines(content, a, b, h), b) for a, b in sentence_spans(content)]
        stated = [(states(content[a:b]), content[a:b]) for a, b in spans if not is_heading_line(content[a:b], h)]
        how, sentence = max(stated, key=lambda st: st[0], default=(0, ""))  # the first that names it, if any
        if key in seen_sections or not how:
            return False
        ext = Draft.of(e.extractive.run(question=question, documents=[h], routed=[], query_embedding=embedding,
                                        content_question=question, reference=""))
        if ext.max_cosine < steps.threshold:
            return False
        seen_sections.add(key)
        readings.append((h, sentence))
        return True

    for h in hits[:k]:
        add(h)
    # several PDFs: one that states it too is a reading even when another's passages crowd it out of the first k
    # (a long contract mentions "notice" ten times, the handbook once), as a comparison looks in each document
    docs = steps.documents(scopes)
    if 2 <= len(docs) <= MAX_DOCS_ASKED:
        for d in docs:
            if any(str((h.meta or {}).get("doc_id", "")) == d.doc_id for h, _ in readings):
                continue
            within = e.retrieve_within(question, scopes, mode, k, doc_filter(d.doc_id)).hits
            next((h for h in within[:3] if add(h)), None)
    firsts: dict[str, int] = {}
    for i, (h, _) in enumerate(readings):
        firsts.setdefault(str((h.meta or {}).get("doc_id", "")), i)
    # each PDF's first reading before a second of any: a choice among sections of one PDF hides another PDF's
    readings = sorted(readings, key=lambda r: (readings.index(r) not in firsts.values(), readings.index(r)))
    readings = readings[:MAX_CHOICES]
    if len(readings) < 2:
        return None
    draft = AnswerDraft()
    draft.lines.append(f"Which {thing} do you mean? The PDFs mention several:")
    choices: list[str] = []
    for i, (h, quote) in enumerate(readings, 1):
        meta = h.meta or {}
        section = leaf(str(meta.get("section", "") or "")) or page_text(h)
        sid = str(meta.get("section_id", "") or "")
        where = f"section {sid}" if sid else f"‘{section}’"  # “…” encloses the whole follow-up
        # the reading's own opening words: the look-up path finds that sentence, not another of the section
        choice = (f"{question.rstrip(' ?')} in {where} of {meta.get('file_name', 'the PDF')}, where it says "
                  f"‘{_opening(quote)}’?")
        choices.append(choice)
        draft.lines.append(f"{i}. {section} ({meta.get('file_name', '')}, {page_text(h)}) {draft.cite(h, quote)} "
                           f"{CHOICE_ARROW} “{choice}”")
    draft.lines.append(CHOICE_HINT)
    return steps.finish(draft, "clarify", choices=choices)


def resolve_choice(question: str, history: Sequence[Turn]) -> str | None:
    """A reply "2" to a "which one?" answer: the second reading's question, from the answer's own text
    (the chat thread's history is all a platform keeps); the thread's latest such answer, so a reading picked
    by its button before is no obstacle. ``None`` for anything else."""
    m = _CHOICE_REPLY.fullmatch(question)
    last = next((t for t in reversed(history) if t.role == "assistant" and CHOICE_ARROW in t.text), None)
    if not m or last is None:
        return None
    line = re.search(rf"(?m)^{m.group(1)}\. .*{re.escape(CHOICE_ARROW)} “([^”]+)”\s*$", last.text)
    return line.group(1) if line else None
