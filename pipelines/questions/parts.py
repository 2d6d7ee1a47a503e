"""Multi-part questions: "what is X and what is Y?" answered a part a line, each by the look-up path, and a part
the PDFs don't cover named as such (:func:`partial`)."""

from __future__ import annotations

from pipelines.components.citation_validator import chunk_id_of
from pipelines.components.llm_answerer import CITATION_MARKER
from pipelines.models import Answer, RetrievalMode
from pipelines.questions.kinds import split_parts
from pipelines.questions.steps import AnswerDraft, AnswerMode, Steps

NOTE_PARTIAL = "Part of your question isn't covered by the PDFs here."


def partial(steps: Steps, question: str, scopes: list[str], mode: RetrievalMode, k: int) -> Answer | None:
    """A multi-part question with a part the PDFs don't cover: the parts they do, and the rest named."""
    parts = split_parts(question)
    if len(parts) < 2:
        return None
    answered: list[tuple[str, Answer]] = []
    missing: list[str] = []
    for p in parts:
        a = steps.engine.answer(p, scopes, mode=mode, k=k)
        if a.refused or not a.citations:
            missing.append(p)
        else:
            answered.append((p, a))
    if not answered:
        return None  # none covered: the look-up path refuses, with pointers to the closest passages
    draft = AnswerDraft()
    written = False
    notes: list[str] = []
    for p, a in answered:
        by_id = {chunk_id_of(d): d for d in steps.chunks(scopes, [c.chunk_id for c in a.citations])}
        marks = {c.n: draft.cite(by_id[c.chunk_id], c.quote) for c in a.citations if c.chunk_id in by_id}
        if a.mode == "llm":  # the model's own answer to this part, its markers renumbered into the whole
            written = True
            draft.lines.append(f"• {p} {_renumbered(a.text, marks)}")
        else:
            draft.lines.append(f"• {p} {''.join(marks.values())}")
        if a.note and a.note not in notes:
            notes.append(a.note)
    for p in missing:
        draft.lines.append(f"• {p} The PDFs don't say.")
    by: AnswerMode = "llm" if written else "extractive"
    if not missing:  # every part covered: still one cited line a part, so no part is lost to the others
        return steps.finish(draft, "multi_part", note=" ".join(notes), mode=by)
    return steps.finish(draft, "partial", note=" ".join([NOTE_PARTIAL, *notes]), mode=by)


def _renumbered(text: str, marks: dict[int, str]) -> str:
    """The model's answer to one part with its ``[n]`` markers renumbered into the whole answer's (``marks``:
    the part's n -> the whole's "[k]"); a marker whose citation was not kept is left out."""
    return CITATION_MARKER.sub(lambda m: f" {marks[int(m.group(1))]}" if int(m.group(1)) in marks else "", text).strip()
