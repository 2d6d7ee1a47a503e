"""LLM-as-judge for ``citebot eval run --judge``: groundedness, completeness and correctness on 0–1.

The judge model is ``CITEBOT_JUDGE_MODEL`` (never the generator's ``CITEBOT_LLM_MODEL`` by default, so a
model does not grade itself), on the same OpenAI-compatible endpoint, at temperature 0. Each criterion is
one call whose reply must be the JSON object ``{"score": <0..1>, "explanation": "<one sentence>"}``; a reply
that is not is asked for once more and then recorded as no score with the reason, never guessed.
Refused answers are not judged (the refusal metrics cover them).
"""

from __future__ import annotations

from typing import Any, Protocol

from connectors.settings import Settings
from eval.records import CaseResult, JudgeScore

JUDGE_PROMPT_VERSION = "judge-v1"

SYSTEM = (
    "You are a strict evaluator of answers produced by a document question-answering bot. "
    "Grade only the criterion you are asked about. Reply with only a JSON object of the form "
    '{"score": <number from 0 to 1>, "explanation": "<one short sentence>"}.'
)

CRITERIA: dict[str, str] = {
    "groundedness": (
        "Criterion: GROUNDEDNESS. Is every factual claim in the ANSWER supported by the QUOTED SOURCES? "
        "1 = every claim is supported by the quotes; 0.5 = some claims are unsupported; 0 = the answer is not "
        "supported by the quotes or contradicts them. Ignore whether the answer is complete."
    ),
    "completeness": (
        "Criterion: COMPLETENESS. Does the ANSWER address every part of the QUESTION (use the EXPECTED ANSWER, "
        "when given, as a guide to what a complete answer contains)? 1 = all parts answered; 0.5 = some parts "
        "missing; 0 = the question is not answered."
    ),
    "correctness": (
        "Criterion: CORRECTNESS. Does the ANSWER agree with the EXPECTED ANSWER? Wording may differ. "
        "1 = same facts; 0.5 = partly right; 0 = wrong or contradicting."
    ),
}


class JudgeError(Exception):
    """The judge cannot run (no LLM or no judge model configured)."""


class _ChatJSON(Protocol):
    def chat_json(self, messages: list[dict[str, str]], *, max_tokens: int = ...) -> dict[str, Any]: ...


def build_client(settings: Settings) -> _ChatJSON:
    if not settings.llm_configured:
        raise JudgeError("--judge needs an LLM: set OPENAI_API_KEY and/or OPENAI_BASE_URL")
    if not settings.judge_model:
        raise JudgeError("--judge needs a judge model separate from the generator: set CITEBOT_JUDGE_MODEL")
    from connectors.llm import client_from_settings

    return client_from_settings(settings, model=settings.judge_model)


def _prompt(criterion: str, r: CaseResult) -> str:
    quotes = "\n".join(
        f"[{c.n}] ({c.file}, p. {c.page_start}{'' if c.page_end == c.page_start else f'-{c.page_end}'}) {c.quote}"
        for c in r.citations
    )
    parts = [CRITERIA[criterion], "", f"QUESTION: {r.question}", "",
             f"ANSWER (as shown, with its quotes):\n{r.shown_text()}"]
    if criterion == "groundedness":
        parts += ["", "QUOTED SOURCES:", quotes or "(none)"]
    if r.expected_answer and criterion != "groundedness":
        parts += ["", f"EXPECTED ANSWER: {r.expected_answer}"]
    return "\n".join(parts)


def _valid(reply: dict[str, Any]) -> JudgeScore | None:
    score, explanation = reply.get("score"), reply.get("explanation")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= float(score) <= 1.0:
        return None
    if not isinstance(explanation, str):
        return None
    return JudgeScore(score=float(score), explanation=explanation.strip()[:500])


def judge_case(client: _ChatJSON, r: CaseResult) -> dict[str, JudgeScore]:
    """Scores for one answered case; criteria that do not apply are left out."""
    if r.refused or r.error:
        return {}
    out: dict[str, JudgeScore] = {}
    for criterion in CRITERIA:
        if criterion == "correctness" and not r.expected_answer:
            continue
        out[criterion] = _ask(client, criterion, r)
    return out


def _ask(client: _ChatJSON, criterion: str, r: CaseResult) -> JudgeScore:
    from connectors.llm import LLMError

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _prompt(criterion, r)}]
    try:
        reply = client.chat_json(messages, max_tokens=200)
        score = _valid(reply)
        if score is None:
            messages += [
                {"role": "assistant", "content": str(reply)[:1000]},
                {"role": "user", "content": 'Reply with only {"score": <number 0..1>, "explanation": "<sentence>"}.'},
            ]
            score = _valid(client.chat_json(messages, max_tokens=200))
    except LLMError as e:
        return JudgeScore(score=None, explanation=f"judge failed: {type(e).__name__}")
    if score is None:
        return JudgeScore(score=None, explanation="judge reply was not {score 0..1, explanation} twice")
    return score
