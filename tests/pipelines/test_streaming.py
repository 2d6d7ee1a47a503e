"""A streamed LLM answer (issue 24 item 8): sentences reach ``show`` as the model writes them, each only after its
citation validated, and the answer decided at the end is the one the non-streaming path decides.

:class:`TestSentencePreview` feeds the preview a reply as the model streams it, a few characters at a time; the
service tests stream from the local OpenAI-format server (server-sent events) through the real ``openai`` client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack import Document

from connectors.settings import Settings
from eval.fakes.openai_api import FakeOpenAI, passages_in
from pipelines.answer_policy import NOTE_DROPPED
from pipelines.components.citation_validator import CitationValidator
from pipelines.components.llm_answerer import keep_supported
from pipelines.models import Citation
from pipelines.service import CitebotService
from pipelines.streaming import SentencePreview
from tests.helpers.pdfs import sections_pdf

SCOPE = "slack:T1:CSTREAM"
LEAVE = "The primary carer receives 26 weeks of parental leave on full pay."
NOTICE = "Employees give four weeks of notice before parental leave starts."
QUESTION = "How many weeks of parental leave does the primary carer get?"
DOCS = [Document(id="d:00000", content=f"{LEAVE} {NOTICE}")]


def _reply(answer: str, quotes: list[str], *, answerable: bool = True, chunk: str = "d:00000") -> str:
    cits = [{"n": n, "chunk_id": chunk, "quote": q} for n, q in enumerate(quotes, 1)]
    return json.dumps({"answerable": answerable, "citations": cits, "answer": answer})


def _valid(quotes: list[str]) -> list[Citation]:
    raw = [{"n": n, "chunk_id": "d:00000", "quote": q} for n, q in enumerate(quotes, 1)]
    return CitationValidator().run(citations=raw, documents=DOCS)["citations"]


def _stream(reply: str, *, whole: bool = True, step: int = 5) -> tuple[list[str], list[int]]:
    """Feed ``reply`` ``step`` characters at a time; returns what was shown, and how far the stream was each time."""
    shown: list[str] = []
    at: list[int] = []
    fed = {"n": 0}

    def show(piece: str) -> None:
        shown.append(piece)
        at.append(fed["n"])

    p = SentencePreview(validator=CitationValidator(), documents=DOCS, show=show, whole=whole)
    for end in range(step, len(reply) + step, step):
        fed["n"] = min(end, len(reply))
        p(reply[: fed["n"]])
    return shown, at


class TestSentencePreview:
    def test_each_sentence_is_shown_once_finished_before_the_reply_ends(self) -> None:
        reply = _reply("Carers get 26 weeks on full pay [1]. Notice is four weeks [2]. That is all [1].",
                       [LEAVE, NOTICE])
        shown, at = _stream(reply)
        assert shown == ["Carers get 26 weeks on full pay [1].", " Notice is four weeks [2].", " That is all [1]."]
        assert at[0] < reply.index("Notice is") + len("Notice is") + 5  # the first, as soon as the next one starts
        assert at[1] < len(reply)

    def test_a_marker_written_after_the_full_stop_stays_with_its_sentence(self) -> None:
        answer = "Carers get 26 weeks. [1][2] Notice is four weeks. [2]"
        shown, _ = _stream(_reply(answer, [LEAVE, NOTICE]), step=1)
        assert shown[0] == "Carers get 26 weeks. [1] [2]"  # never "… weeks. [1]" and then a lone "[2]"
        assert len(shown) == 2 and shown[1].strip() == "Notice is four weeks. [2]"
        assert "".join(shown) == keep_supported(answer, _valid([LEAVE, NOTICE])).text  # as the policy words it

    def test_a_first_draft_with_a_failing_citation_shows_nothing(self) -> None:
        shown, _ = _stream(_reply("Carers get 26 weeks [1]. They get a car [2].", [LEAVE, "A company car is given."]))
        assert shown == []  # the policy asks again; the second draft is the one shown

    def test_in_a_second_draft_only_the_sentence_whose_quote_holds_is_shown(self) -> None:
        reply = _reply("They get a car [2]. Carers get 26 weeks [1]. Nobody said this.",
                       [LEAVE, "A company car is given."])
        shown, _ = _stream(reply, whole=False)
        assert shown == ["Carers get 26 weeks [1]."]
        assert "car" not in "".join(shown)

    def test_a_draft_that_cannot_answer_shows_nothing(self) -> None:
        assert _stream(_reply("", [], answerable=False))[0] == []

    def test_a_fenced_reply_streams_too(self) -> None:
        shown, _ = _stream("```json\n" + _reply("Carers get 26 weeks [1]. Notice is four weeks [2].",
                                                  [LEAVE, NOTICE]) + "\n```")
        assert shown == ["Carers get 26 weeks [1].", " Notice is four weeks [2]."]

    def test_answer_before_citations_is_shown_only_once_they_are_there(self) -> None:
        reply = json.dumps({"answerable": True, "answer": "Carers get 26 weeks [1]. Notice is four weeks [2].",
                            "citations": [{"n": 1, "chunk_id": "d:00000", "quote": LEAVE},
                                          {"n": 2, "chunk_id": "d:00000", "quote": NOTICE}]})
        shown, at = _stream(reply)
        assert "".join(shown) == "Carers get 26 weeks [1]. Notice is four weeks [2]."
        assert at[0] > reply.index('"citations"')

    def test_a_failing_show_stops_the_preview_not_the_answer(self) -> None:
        tried: list[str] = []

        def show(piece: str) -> None:
            tried.append(piece)
            raise OSError("the chat platform is gone")

        p = SentencePreview(validator=CitationValidator(), documents=DOCS, show=show, whole=True)
        reply = _reply("Carers get 26 weeks [1]. Notice is four weeks [2].", [LEAVE, NOTICE])
        for end in range(1, len(reply) + 1):
            p(reply[:end])  # never raises
        assert len(tried) == 1  # the first sentence was tried; after the failure nothing more is sent


# --- through the service, streamed by the local OpenAI-format server -------------------------------


@pytest.fixture(scope="module")
def handbook() -> bytes:
    return sections_pdf([("4.2 Parental leave", f"{LEAVE} {NOTICE}")])


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as f:
        yield f


@pytest.fixture
def service(tmp_path: Path, fake: FakeOpenAI, handbook: bytes) -> CitebotService:
    settings = Settings(data_dir=tmp_path / "data", ocr_enabled=False, openai_base_url=fake.base_url,
                        llm_model="fake-model")
    svc = CitebotService(settings)
    assert svc.ingest(handbook, file_name="handbook.pdf", scope=SCOPE).status == "indexed"
    return svc


def _cited(answer: str, quotes: list[str]) -> Any:
    def reply(req: dict[str, Any]) -> str:
        chunk = next(cid for cid, text in passages_in(req) if LEAVE in " ".join(text.split()))
        return _reply(answer, quotes, chunk=chunk)

    return reply


@pytest.mark.slow
def test_the_first_sentence_is_shown_while_the_model_is_still_writing(service: CitebotService,
                                                                      fake: FakeOpenAI) -> None:
    fake.responder = _cited("Carers get 26 weeks on full pay [1]. Notice is four weeks [2].", [LEAVE, NOTICE])
    expected = service.answer(QUESTION, SCOPE)  # the non-streaming path
    gate = fake.hold_stream("Notice is")
    first = threading.Event()
    shown: list[tuple[str, int]] = []

    def show(piece: str) -> None:
        shown.append((piece, fake.streams_ended))
        first.set()

    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(answer=service.answer(QUESTION, SCOPE, show=show)))
    worker.start()
    try:
        assert first.wait(60), "no sentence was shown while the model was held mid-answer"
        assert shown == [("Carers get 26 weeks on full pay [1].", 0)]  # the model's stream has not ended
        assert fake.streams_ended == 0
    finally:
        gate.set()
        worker.join(60)
    assert fake.requests[-1]["stream"] is True
    assert [p for p, _ in shown] == ["Carers get 26 weeks on full pay [1].", " Notice is four weeks [2]."]
    answer = result["answer"]
    assert "".join(p for p, _ in shown) == answer.text
    assert answer.model_dump(exclude={"timings_ms"}) == expected.model_dump(exclude={"timings_ms"})


@pytest.mark.slow
def test_a_sentence_whose_quote_fails_is_never_shown(service: CitebotService, fake: FakeOpenAI) -> None:
    fake.responder = _cited("Carers get 26 weeks [1]. Every employee gets a company car [2].",
                            [LEAVE, "Every employee receives a company car."])
    shown: list[str] = []
    answer = service.answer(QUESTION, SCOPE, show=shown.append)
    drafts = [r for r in fake.requests if not r.get("tools")]  # (triage's gathering round offers tools, unstreamed)
    assert len(drafts) == 2 and all(r["stream"] for r in drafts)  # the stricter retry streams too
    assert shown == ["Carers get 26 weeks [1]."]  # from the retry only: nothing of the first draft
    assert not any("car" in piece for piece in shown)
    assert answer.text == "Carers get 26 weeks [1]." and answer.note == NOTE_DROPPED
    fake.requests.clear()
    assert service.answer(QUESTION, SCOPE).model_dump(exclude={"timings_ms"}) == answer.model_dump(
        exclude={"timings_ms"})


@pytest.mark.slow
def test_extractive_mode_shows_nothing_early(tmp_path: Path, handbook: bytes) -> None:
    svc = CitebotService(Settings(data_dir=tmp_path / "data", ocr_enabled=False))
    assert svc.ingest(handbook, file_name="handbook.pdf", scope=SCOPE).status == "indexed"
    shown: list[str] = []
    answer = svc.answer(QUESTION, SCOPE, show=shown.append)
    assert answer.mode == "extractive" and shown == []
