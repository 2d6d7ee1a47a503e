"""The query engine end to end on a real SQLite store with real embeddings: scopes, routing, refusal,
follow-ups, and the LLM path against a local fake OpenAI server (real openai client)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from haystack import Document, Pipeline
from haystack.document_stores.types import DuplicatePolicy

from connectors.embedding import embed
from connectors.llm import client_from_settings
from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from eval.fakes.openai_api import FakeOpenAI, passages_in
from pipelines.answer_policy import NOTE_DROPPED, NOTE_LLM_FAILED, NOTE_LLM_UNSUPPORTED
from pipelines.models import Turn
from pipelines.query import QueryEngine, build_query_pipeline, pipeline_inputs
from pipelines.service import CitebotService
from tests.helpers.stores import count_calls

pytestmark = pytest.mark.slow

A, B = "slack:T1:CA", "slack:T1:CB"


def _chunk(scope, doc_id, i, page, content, *, section="", section_id="", etype="text", label="", file="hb.pdf"):
    return Document(
        id=f"{doc_id}:{i:05d}",
        content=content,
        meta={
            "scope": scope,
            "doc_id": doc_id,
            "file_name": file,
            "page_start": page,
            "page_end": page,
            "section": section,
            "section_id": section_id,
            "element_type": etype,
            "label": label,
            "chunk_index": i,
            "sha256": doc_id * 8,
            "uploaded_by": "",
            "uploaded_at": "2024-03-01T00:00:00Z",
        },
    )


CORPUS = [
    _chunk(
        A,
        "hb",
        0,
        1,
        "1 Introduction\nHalvorsen & Pike Engineering Ltd. was founded in 1994 in Leeds. "
        "Today the company employs 1,240 people across four offices.",
        section="1 Introduction",
        section_id="1",
    ),
    _chunk(
        A,
        "hb",
        1,
        2,
        "2 Working Hours\nThe standard working week is 37.5 hours, Monday to Friday. Core hours are 10:00 to 15:00.",
        section="2 Working Hours",
        section_id="2",
    ),
    _chunk(
        A,
        "hb",
        2,
        5,
        "4 Leave > 4.2 Parental leave\nThe primary carer receives 26 weeks of parental leave on "
        "full pay. The secondary carer receives 6 weeks of paid parental leave.",
        section="4 Leave > 4.2 Parental leave",
        section_id="4.2",
    ),
    _chunk(
        A,
        "hb",
        3,
        9,
        "Table 2: Revenue and headcount by year\nYear | Revenue (GBP m) | Headcount\n"
        "2019 | 70.4 | 940\n2020 | 78.9 | 990\n2021 | 88.0 | 1,050\n2022 | 97.5 | 1,180",
        section="7 Finance",
        section_id="7",
        etype="table",
        label="Table 2",
    ),
    _chunk(
        A,
        "hb",
        4,
        12,
        "10 Information Security\nPasswords must be at least 14 characters long and are "
        "changed only after a suspected compromise.",
        section="10 Information Security",
        section_id="10",
    ),
    # scope B: a much better match for the parental-leave question, which scope A must never see
    _chunk(
        B,
        "sec",
        0,
        1,
        "Parental leave: the primary carer receives 52 weeks of parental leave on full pay "
        "under the confidential Project Osprey agreement.",
        section="Parental leave",
        file="osprey.pdf",
    ),
]
B_MARKERS = ("Osprey", "52 weeks", "osprey.pdf", "sec:")


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(data_dir=tmp_path_factory.mktemp("engine"))


@pytest.fixture(scope="module")
def store(settings):
    # vectors made as an ingest would make them, and recorded as such (else the store counts as a legacy one)
    vecs = embed([d.content for d in CORPUS], path=settings.resolved_model_path, backend=settings.embedding_backend,
                 models_dir=settings.resolved_models_dir)
    s = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=settings.embedding_dim)
    s.write_documents([replace(d, embedding=v) for d, v in zip(CORPUS, vecs, strict=True)], DuplicatePolicy.OVERWRITE)
    s.set_embedding_fingerprint(settings.embedding_fingerprint)
    return s


@pytest.fixture(scope="module")
def engine(settings, store):
    e = QueryEngine(settings, store)
    e.warm_up()
    return e


def _no_b(answer) -> None:
    dumped = json.dumps(answer.model_dump(), ensure_ascii=False)
    assert not any(m in dumped for m in B_MARKERS), "scope B leaked into an answer in scope A"


class TestExtractivePath:
    @pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
    def test_scope_isolation(self, engine, mode):
        answer = engine.answer("How many weeks of parental leave does the primary carer get?", [A], mode=mode)
        _no_b(answer)
        assert not answer.refused
        assert any("26 weeks" in c.quote for c in answer.citations)
        docs = engine.passages("Project Osprey confidential agreement 52 weeks", [A], mode=mode, k=10)
        assert docs and all(d.meta["scope"] == A for d in docs)
        # and the other way round: B only sees B
        b = engine.answer("How many weeks of parental leave does the primary carer get?", [B], mode=mode)
        assert all(r.chunk_id.startswith("sec:") for r in b.retrieved)

    def test_answer_quotes_verbatim_with_location(self, engine):
        answer = engine.answer("What are the core hours?", [A])
        assert answer.mode == "extractive" and not answer.refused
        c = answer.citations[0]
        assert c.quote == "Core hours are 10:00 to 15:00."
        assert (c.file, c.page_start, c.section, c.chunk_id) == ("hb.pdf", 2, "2 Working Hours", "hb:00001")
        assert answer.validation.exact == len(answer.citations)
        assert answer.text.startswith("Here is what the PDFs say [1]")
        assert answer.retrieved and answer.timings_ms.total >= answer.timings_ms.retrieve

    @pytest.mark.parametrize(
        "question",
        ["What is the dress code for client meetings?", "Which cryptocurrency wallets are supported for payroll?"],
    )
    def test_refuses_unanswerable_and_points_at_passages(self, engine, question):
        answer = engine.answer(question, [A])
        assert answer.refused and answer.citations == []
        assert answer.text.startswith("The PDFs in this channel don't seem to answer that.")
        assert 1 <= answer.text.count("• hb.pdf · p.") <= 3

    def test_a_year_the_pdfs_never_mention_is_refused_and_the_right_year_answered(self, engine):
        """The near miss real users ask: the right topic, a period the documents do not cover."""
        assert not engine.answer("In which year was Halvorsen & Pike founded, and in which city?", [A]).refused
        wrong = engine.answer("How many people did Halvorsen & Pike employ in 2031?", [A])
        assert wrong.refused and wrong.citations == []

    def test_a_word_the_pdfs_use_in_another_form_counts_as_mentioned(self, engine):
        """Refusal weighs the question's words the PDFs never use; "founding" is not missing from a PDF that
        says "founded" (nor "changing" from "changed"), but a word only another channel's PDF uses is."""
        assert engine.term_support(["founding", "employing", "changing", "offices"], [A], None) == 1.0
        assert engine.term_support(["osprey", "founding"], [A], None) == 0.5
        assert engine.term_support(["1994", "1995"], [A], None) == 0.5  # numbers are looked up as they are

    def test_format_instructions_do_not_steer_retrieval(self, engine):
        plain = engine.answer("What are the core hours?", [A])
        instructed = engine.answer(
            "What are the core hours? Please write the answer in list format, e.g., [\"9:00\", \"17:00\"].", [A]
        )
        assert [c.quote for c in instructed.citations] == [c.quote for c in plain.citations]

    def test_routes_page_reference(self, engine):
        answer = engine.answer("What does page 12 say?", [A])
        assert [c.page_start for c in answer.citations] == [12]
        assert answer.citations[0].quote.startswith("Passwords must be at least 14 characters")
        assert answer.text == "From page 12 [1]:"
        assert answer.retrieved[0].page_start == 12  # referenced chunks come first

    def test_routes_section_reference(self, engine):
        answer = engine.answer("What does § 4.2 say about the secondary carer?", [A])
        assert any("secondary carer receives 6 weeks" in c.quote for c in answer.citations)
        _no_b(answer)

    def test_routes_table_reference(self, engine):
        answer = engine.answer("Which year in table 2 has the highest revenue?", [A])
        assert len(answer.citations) == 1 and "2022 | 97.5 | 1,180" in answer.citations[0].quote

    def test_follow_up_carries_terms(self, engine):
        history = [Turn(role="user", text="What was the revenue in 2020?"), Turn(role="assistant", text="…")]
        answer = engine.answer("and in 2019?", [A], history)
        assert not answer.refused
        # the row that answers, after its table's header line so it can be read
        assert [c.quote for c in answer.citations[:2]] == ["Year | Revenue (GBP m) | Headcount", "2019 | 70.4 | 940"]

    def test_confidence_is_what_the_refusal_threshold_is_compared_with(self, settings, store, engine):
        question = "What are the core hours?"
        answered = engine.answer(question, [A])
        assert not answered.refused and answered.confidence is not None
        assert answered.confidence == pytest.approx(engine.relevance(question, [A]))
        # an admin raising the threshold just past the recorded confidence turns this answer into a refusal
        stricter = QueryEngine(settings.model_copy(update={"refusal_threshold": answered.confidence + 1e-6}), store)
        assert stricter.answer(question, [A]).refused
        at = QueryEngine(settings.model_copy(update={"refusal_threshold": answered.confidence}), store)
        assert not at.answer(question, [A]).refused
        refused = engine.answer("What is the dress code for client meetings?", [A])
        assert refused.refused and refused.confidence is not None
        assert refused.confidence < settings.refusal_threshold

    def test_empty_scope_refuses(self, engine):
        answer = engine.answer("What are the core hours?", ["teams:x:y"])
        assert answer.refused and answer.retrieved == []


def test_build_query_pipeline_modes(settings, store):
    for mode, names in (
        ("hybrid", {"embedder", "dense", "bm25", "joiner"}),
        ("bm25", {"bm25", "joiner"}),
        ("dense", {"embedder", "dense", "joiner"}),
    ):
        assert set(build_query_pipeline(settings, store, mode).graph.nodes) == names
    with pytest.raises(ValueError, match="mode"):
        build_query_pipeline(settings, store, "fuzzy")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
@pytest.mark.parametrize(
    "question", ["How many weeks of parental leave does the primary carer get?", "When was the company founded?"]
)
def test_the_saved_pipeline_ranks_as_the_engine_does(settings, store, engine, mode, question):
    """The engine runs the pipeline's components itself (no per-value deep copies); the pipeline built by
    build_query_pipeline, saved as YAML and loaded back, then run by Haystack, must rank the same chunks in
    the same order."""
    pipeline = Pipeline.loads(
        build_query_pipeline(settings, store, mode).dumps(), allowed_modules=["connectors", "pipelines"]
    )
    out = pipeline.run(pipeline_inputs(mode, question, [A], None, settings.retrieval_top_k))
    engine_hits, _ = engine.search(question, [A], mode=mode)
    assert [d.id for d in out["joiner"]["documents"]] == [d.id for d in engine_hits]
    assert engine_hits, "the question should retrieve something in scope A"


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_the_fusion_setting_reaches_the_hybrid_pipeline_and_its_saved_form(settings, store, fusion):
    """CITEBOT_FUSION picks the hybrid joiner's fusion; the saved pipeline keeps it and ranks as the engine does.
    One-retriever modes have nothing to fuse and stay as they were."""
    s = settings.model_copy(update={"fusion": fusion})
    question = "How many weeks of parental leave does the primary carer get?"
    pipeline = Pipeline.loads(build_query_pipeline(s, store, "hybrid").dumps(),
                              allowed_modules=["connectors", "pipelines"])
    assert str(pipeline.get_component("joiner").fusion) == fusion
    engine = QueryEngine(s, store)
    engine.warm_up()
    out = pipeline.run(pipeline_inputs("hybrid", question, [A], None, s.retrieval_top_k))
    engine_hits, _ = engine.search(question, [A])
    assert engine_hits and [d.id for d in out["joiner"]["documents"]] == [d.id for d in engine_hits]
    assert str(build_query_pipeline(s, store, "bm25").get_component("joiner").fusion) == "weighted"


# --- LLM path --------------------------------------------------------------------------------------

QUESTION = "How many weeks of parental leave does the primary carer get?"
GOOD_QUOTE = "The primary carer receives 26 weeks of parental leave on full pay."


@pytest.fixture
def fake():
    with FakeOpenAI() as f:
        yield f


def _llm_engine(settings, store, fake, **over):
    s = settings.model_copy(update={"openai_base_url": fake.base_url, "llm_model": "fake-model", **over})
    waits: list[float] = []
    e = QueryEngine(s, store, llm_client=client_from_settings(s, sleep=waits.append))
    e.warm_up()
    return e, waits


def _chunk_id_with(fake_req, text) -> str:
    return next(cid for cid, body in passages_in(fake_req) if text in body)


class TestLLMPath:
    def test_good_answer(self, settings, store, fake):
        fake.responder = lambda req: json.dumps(
            {
                "answerable": True,
                "answer": "The primary carer gets 26 weeks on full pay [1].",
                "citations": [{"n": 1, "chunk_id": _chunk_id_with(req, GOOD_QUOTE), "quote": GOOD_QUOTE}],
            }
        )
        engine, _ = _llm_engine(settings, store, fake)
        answer = engine.answer(QUESTION, [A])
        assert answer.mode == "llm" and not answer.refused and answer.note == ""
        assert answer.text == "The primary carer gets 26 weeks on full pay [1]."
        assert [c.quote for c in answer.citations] == [GOOD_QUOTE]
        assert answer.validation.exact == 1 and not answer.validation.retried
        req = fake.requests[-1]
        assert req["temperature"] == 0 and req["model"] == "fake-model"
        assert not any(m in json.dumps(req) for m in B_MARKERS)  # scope B never reaches the model either

    def test_fabricated_quote_is_retried_then_dropped(self, settings, store, fake):
        def reply(req):
            cid = _chunk_id_with(req, GOOD_QUOTE)
            return json.dumps(
                {
                    "answerable": True,
                    "answer": "The primary carer gets 26 weeks [1]. They also get a company car [2].",
                    "citations": [
                        {"n": 1, "chunk_id": cid, "quote": "the primary carer receives 26 weeks"},
                        {"n": 2, "chunk_id": cid, "quote": "Primary carers also receive a company car."},
                    ],
                }
            )

        fake.responder = reply
        engine, _ = _llm_engine(settings, store, fake)
        answer = engine.answer(QUESTION, [A])
        assert len(fake.requests) == 2
        assert "company car" in fake.requests[1]["messages"][-1]["content"]  # the stricter prompt names it
        assert answer.mode == "llm"
        assert answer.text == "The primary carer gets 26 weeks [1]."
        assert [c.quote for c in answer.citations] == ["The primary carer receives 26 weeks"]  # exact source span
        v = answer.validation
        assert v.retried and v.unmatched == 2 and v.normalised == 2
        assert answer.note == NOTE_DROPPED

    def test_unknown_chunk_id_is_retried(self, settings, store, fake):
        fake.push_json(
            {
                "answerable": True,
                "answer": "26 weeks [1].",
                "citations": [{"n": 1, "chunk_id": "made-up:00007", "quote": GOOD_QUOTE}],
            }
        )
        fake.responder = lambda req: json.dumps(
            {
                "answerable": True,
                "answer": "26 weeks on full pay [1].",
                "citations": [{"n": 1, "chunk_id": _chunk_id_with(req, GOOD_QUOTE), "quote": GOOD_QUOTE}],
            }
        )
        engine, _ = _llm_engine(settings, store, fake)
        answer = engine.answer(QUESTION, [A])
        assert "'made-up:00007' is not one of the passages" in fake.requests[1]["messages"][-1]["content"]
        assert answer.mode == "llm" and answer.citations[0].chunk_id == "hb:00002"
        assert answer.validation.unknown_chunk == 1 and answer.validation.exact == 1

    def test_nothing_valid_after_retry_falls_back_to_extractive(self, settings, store, fake):
        fake.responder = lambda req: json.dumps(
            {
                "answerable": True,
                "answer": "Everyone gets a year off [1].",
                "citations": [{"n": 1, "chunk_id": "hb:00002", "quote": "Everyone gets a paid year off."}],
            }
        )
        engine, _ = _llm_engine(settings, store, fake)
        answer = engine.answer(QUESTION, [A])
        assert answer.mode == "extractive" and answer.note == NOTE_LLM_UNSUPPORTED
        assert any("26 weeks" in c.quote for c in answer.citations)
        assert answer.validation.unmatched == 2

    def test_429_with_retry_after(self, settings, store, fake):
        fake.push(status=429, headers={"Retry-After": "2"})
        engine, waits = _llm_engine(settings, store, fake)
        answer = engine.answer(QUESTION, [A])
        assert waits == [2.0]
        assert answer.mode == "llm" and answer.citations

    def test_timeout_falls_back_to_extractive_with_note(self, settings, store, fake):
        fake.push(json.dumps({"answerable": True, "answer": "", "citations": []}), delay_s=2.0)
        engine, _ = _llm_engine(settings, store, fake, llm_timeout_s=0.3)
        answer = engine.answer(QUESTION, [A])
        assert answer.mode == "extractive" and answer.note == NOTE_LLM_FAILED
        assert any("26 weeks" in c.quote for c in answer.citations)

    def test_malformed_json_falls_back(self, settings, store, fake):
        fake.push("I think the answer is 26 weeks.")
        fake.push("{not json")
        engine, _ = _llm_engine(settings, store, fake)
        answer = engine.answer(QUESTION, [A])
        assert answer.mode == "extractive" and answer.note == NOTE_LLM_FAILED and answer.citations

    def test_model_says_unanswerable(self, settings, store, fake):
        fake.push_json({"answerable": False, "answer": "", "citations": []})
        engine, _ = _llm_engine(settings, store, fake)
        answer = engine.answer("How many weeks of parental leave do grandparents get?", [A])
        assert answer.refused and answer.mode == "llm" and answer.citations == []
        assert "• hb.pdf" in answer.text

    def test_follow_up_uses_condensing_prompt(self, settings, store, fake):
        fake.push_json({"question": "What was the revenue in 2019?"})
        engine, _ = _llm_engine(settings, store, fake)
        history = [Turn(role="user", text="What was the revenue in 2020?"), Turn(role="assistant", text="…")]
        engine.answer("and in 2019?", [A], history)
        assert "standalone question" in fake.requests[0]["messages"][0]["content"]


class TestStoreTrips:
    """The chunk store's round trips for a first question (the status line's count, then the answer), as
    ARCHITECTURE.md lists them: the scope's documents listed once for both (the listing is its own count), every
    term looked up in one call."""

    def test_a_first_question_lists_the_documents_once_and_looks_its_terms_up_in_one_call(self, settings, store):
        counted = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=settings.embedding_dim)
        service = CitebotService(settings, store=counted)
        service.query.warm_up()
        calls = count_calls(counted)
        assert service.document_count([A]) == 1
        answer = service.answer("How many weeks of parental leave does the primary carer get?", [A])
        assert not answer.refused and "26 weeks" in " ".join(c.quote for c in answer.citations)
        _no_b(answer)
        assert calls == ["list_documents", "embedding_search", "bm25_search", "document_vectors", "bm25_matches_each"]

    def test_a_word_only_another_scope_holds_is_not_support(self, settings, store):
        counted = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=settings.embedding_dim)
        service = CitebotService(settings, store=counted)
        calls = count_calls(counted)
        answer = service.answer("What does the Project Osprey agreement give the primary carer?", [A])
        _no_b(answer)
        assert calls.count("bm25_matches_each") == 1 and "bm25_matches" not in calls
        assert service.query.term_support(["osprey", "agreement"], [A], None) == 0.0
        assert service.query.term_support(["osprey", "agreement"], [B], None) == 1.0

    def test_a_question_is_parsed_for_references_once(self, settings, store):
        """classify (which answer kinds apply), the router and the reference kind all read the question's page,
        section and table references: one parse serves them all."""
        from pipelines.components.structure_router import parse_refs

        service = CitebotService(settings, store=store)
        for question in ["How many weeks of parental leave does the primary carer get?", "What does page 12 say?"]:
            parse_refs.cache_clear()
            service.answer(question, [A])
            assert parse_refs.cache_info().misses == 1, question
