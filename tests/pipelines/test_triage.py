"""LLM triage (issue 24 item 7) on the sample PDFs, against the local OpenAI-format server on 127.0.0.1: the model
sees the asker's outline, calls tools to fetch a page, a section, a table, a figure or to search, and answers with
quotes validated against what it fetched; the calls are bounded, every fetch stays inside the asker's scopes, and
an endpoint without tools gets the passages-only answer."""

from __future__ import annotations

import json

import pytest

from connectors.settings import Settings
from eval.fakes.openai_api import (
    FakeOpenAI,
    fetched_passages,
    fetching_responder,
    looping_responder,
    passages_in,
    quoting_responder,
    tool_results,
)
from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes
from pipelines.answer_policy import NOTE_LLM_FAILED
from pipelines.service import CitebotService
from pipelines.triage import BUDGET_SPENT, DATA_HEAD, TOOLS, Triage

pytestmark = pytest.mark.slow

OURS, THEIRS = "slack:T1:COURS", "slack:T2:CTHEIRS"  # the handbook here; the agreement in another workspace
# words of the agreement's text (not of its file name, which a model may write in a call and see echoed)
CONTRACT_WORDS = ("184,000", "Business Day", "Confidential Information", "Brightwater Analytics GmbH")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    svc = CitebotService(Settings(_env_file=None, data_dir=tmp_path_factory.mktemp("triage"),  # type: ignore[call-arg]
                                  ocr_enabled=False))
    assert svc.ingest(sample_bytes(HANDBOOK), file_name=HANDBOOK, scope=OURS).status == "indexed"
    assert svc.ingest(sample_bytes(CONTRACT), file_name=CONTRACT, scope=THEIRS).status == "indexed"
    return svc


@pytest.fixture(scope="module")
def ids(base):
    (hb,) = base.list_documents(OURS)
    (contract,) = base.list_documents(THEIRS)
    return hb.doc_id, contract.doc_id


def _llm(base, fake, **over):
    settings = base.settings.model_copy(update={"openai_base_url": fake.base_url, **over})
    return CitebotService(settings, store=base.store)


def _chunk_text(base, scope, chunk_id):
    doc_id = chunk_id.rsplit(":", 1)[0]
    chunks = base.store.fetch(scopes=[scope], filters={"field": "meta.doc_id", "operator": "==", "value": doc_id})
    return {f"{d.meta['doc_id']}:{d.meta['chunk_index']:05d}": d.content for d in chunks}[chunk_id]


@pytest.mark.parametrize(
    ("question", "call", "page", "section"),
    [
        ("What does the handbook cover right after the remote work rules?",
         {"name": "fetch_section", "arguments": {"section": "6"}}, 8, "6 Travel and Expenses"),
        ("What comes in the handbook after the pension and health cover rules?",
         {"name": "fetch_page", "arguments": {"page": 4}}, 4, "4 Leave"),
        ("What does the company's performance table show?",
         {"name": "fetch_table", "arguments": {"label": "Table 2"}}, 9, "7 Company Performance"),
    ],
)
def test_a_structure_question_is_answered_from_what_the_model_fetched(base, ids, question, call, page, section):
    hb, _ = ids
    call = {**call, "arguments": {**call["arguments"], "document_id": hb}}
    with FakeOpenAI(fetching_responder(call)) as fake:
        a = _llm(base, fake).answer(question, OURS)
    assert a.mode == "llm" and not a.refused, a.text
    (cited,) = a.citations
    assert (cited.file, cited.page_start, cited.section) == (HANDBOOK, page, section)
    assert cited.quote in _chunk_text(base, OURS, cited.chunk_id)  # validated against the chunk it fetched
    first, second = fake.requests
    # the first request offered the tools and the outline of the asker's PDFs
    assert [t["function"]["name"] for t in first["tools"]] == [t["function"]["name"] for t in TOOLS]
    prompt = first["messages"][1]["content"]
    assert f'- document_id "{hb}": {HANDBOOK}, 14 pages' in prompt
    assert "6 Travel and Expenses (p. 8)" in prompt and "Table 2 (p. 9: Revenue and headcount by year" in prompt
    # the next request carried the tool's result: the fetched passages, under their chunk ids
    (result,) = tool_results(second)
    assert result["name"] == call["name"] and result["content"].startswith(DATA_HEAD)
    assert f"[chunk_id: {cited.chunk_id}] {HANDBOOK}, p. {page}" in result["content"]
    if call["name"] != "fetch_table":  # the table question retrieves the table itself; the others did not have it
        assert cited.chunk_id not in {cid for cid, _ in passages_in(first)}


def test_a_fetch_naming_another_channels_document_gets_nothing(base, ids):
    hb, theirs = ids
    calls = [
        {"name": "fetch_page", "arguments": {"document_id": theirs, "page": 3}},
        {"name": "fetch_section", "arguments": {"document_id": theirs, "section": "III"}},
        {"name": "fetch_table", "arguments": {"document_id": CONTRACT, "label": "Table 1"}},
        {"name": "search", "arguments": {"document_id": theirs, "query": "annual subscription fee"}},
    ]
    with FakeOpenAI(fetching_responder(*calls)) as fake:
        a = _llm(base, fake).answer("What is the annual leave entitlement?", OURS)
    results = tool_results(fake.requests[1])
    assert [r["content"] for r in results] == [
        f"Not found: no document {theirs!r} among the PDFs you may read. Use a document_id from the outline.",
        f"Not found: no document {theirs!r} among the PDFs you may read. Use a document_id from the outline.",
        f"Not found: no document {CONTRACT!r} among the PDFs you may read. Use a document_id from the outline.",
        f"Not found: no document {theirs!r} among the PDFs you may read. Use a document_id from the outline.",
    ]
    # an id that exists nowhere reads the same: the reply says nothing of other channels
    with FakeOpenAI(fetching_responder({"name": "fetch_page", "arguments": {"document_id": "0" * 24, "page": 3}})
                    ) as other:
        _llm(base, other).answer("What is the annual leave entitlement?", OURS)
    assert tool_results(other.requests[1])[0]["content"] == results[0]["content"].replace(theirs, "0" * 24)
    # nothing of the other workspace's PDF reached the model, in the outline, the passages or a tool result
    sent = json.dumps([m.get("content") for r in fake.requests for m in r["messages"] if m["role"] != "assistant"])
    assert theirs not in json.dumps(fake.requests[0]) and CONTRACT not in json.dumps(fake.requests[0])
    assert not any(w in sent for w in CONTRACT_WORDS)
    assert a.mode == "llm" and {c.doc_id for c in a.citations} == {hb}


def test_a_search_or_label_without_a_document_stays_in_the_askers_scope(base, ids):
    hb, _ = ids
    calls = [{"name": "search", "arguments": {"query": "annual subscription fee payment schedule"}},
             {"name": "fetch_table", "arguments": {"label": "Table 1"}}]  # both PDFs have a Table 1
    with FakeOpenAI(fetching_responder(*calls)) as fake:
        _llm(base, fake).answer("What is the annual leave entitlement?", OURS)
    search, table = tool_results(fake.requests[1])
    assert search["content"].startswith(DATA_HEAD) and table["content"].startswith(DATA_HEAD)
    assert "Table 1: Annual leave by years of service" in table["content"]
    for r in (search, table):
        assert f"[chunk_id: {hb}:" in r["content"] and not any(w in r["content"] for w in CONTRACT_WORDS)


@pytest.mark.parametrize("answers_without_tools", [False, True])
def test_a_model_that_calls_tools_forever_is_stopped_after_the_limit(base, ids, answers_without_tools):
    hb, _ = ids
    forever = looping_responder({"name": "fetch_page", "arguments": {"document_id": hb, "page": 8}})

    def model(request):
        return quoting_responder(request) if answers_without_tools and not request.get("tools") else forever(request)

    with FakeOpenAI(model) as fake:
        a = _llm(base, fake, llm_max_tool_calls=2).answer("How are expense claims submitted?", OURS)
    offered = fake.tools_requests()
    assert len(offered) == 3  # two calls run, then one request telling it to answer, offering no tool
    assert [r.get("tool_choice") for r in offered] == ["auto", "auto", "none"]
    results = tool_results(offered[-1])
    assert len(results) == 2 and all(r["content"].startswith(DATA_HEAD) for r in results)
    assert len(fake.requests) <= len(offered) + 2  # then the passages-only answer (and its one JSON retry)
    assert not a.refused and a.citations
    for c in a.citations:
        assert c.quote in _chunk_text(base, OURS, c.chunk_id)
    if answers_without_tools:  # the passages-only answer may quote the page the tools fetched
        assert a.mode == "llm" and a.citations[0].page_start == 8
    else:  # nothing usable from the model: the extractive answer, saying why
        assert a.mode == "extractive" and a.note == NOTE_LLM_FAILED


def test_calls_beyond_the_limit_in_one_reply_are_not_run(base, ids):
    hb, _ = ids
    calls = [{"name": "fetch_page", "arguments": {"document_id": hb, "page": p}} for p in (2, 3, 4)]
    with FakeOpenAI(fetching_responder(*calls)) as fake:
        a = _llm(base, fake, llm_max_tool_calls=2).answer("What are the core hours?", OURS)
    results = tool_results(fake.requests[1])
    assert [r["content"].startswith(DATA_HEAD) for r in results] == [True, True, False]
    assert results[2]["content"] == BUDGET_SPENT.format(n=2)
    assert fake.requests[1]["tool_choice"] == "none" and a.mode == "llm"


def test_each_tool_result_is_bounded(base, ids):
    hb, _ = ids
    call = {"name": "fetch_section", "arguments": {"document_id": hb, "section": "4"}}  # 4 Leave: 6 passages
    with FakeOpenAI(fetching_responder(call)) as fake:
        _llm(base, fake, llm_tool_result_chars=600).answer("How does annual leave work?", OURS)
    (result,) = tool_results(fake.requests[1])
    text = result["content"].removeprefix(DATA_HEAD)
    assert len(text.split("\n\n(")[0]) <= 600
    assert text.endswith("more passages not shown: ask for a narrower part.)")


@pytest.mark.parametrize("server", ["vllm", "llama.cpp"])
def test_an_endpoint_without_tools_gets_the_passages_only_answer_and_is_not_offered_tools_again(base, server):
    # vLLM without --enable-auto-tool-choice answers 400; llama.cpp without --jinja fails with 500
    with FakeOpenAI(tools_unsupported=server == "vllm") as fake:
        if server == "llama.cpp":
            fake.push(status=500, body=b'{"error": {"code": 500, "message": "tools param requires --jinja flag"}}')
        svc = _llm(base, fake, llm_max_retries=0)
        a = svc.answer("How are expense claims submitted?", OURS)
        b = svc.answer("What are the core hours?", OURS)
    assert a.mode == "llm" and b.mode == "llm" and a.citations and b.citations
    assert [bool(r.get("tools")) for r in fake.requests] == [True, False, False]  # refused once, remembered


def test_bad_tool_calls_are_answered_with_an_error_and_the_model_carries_on(base, ids):
    hb, _ = ids
    calls = [{"name": "delete_everything", "arguments": {}},
             {"name": "fetch_page", "arguments": {"document_id": hb, "page": 99}},
             {"name": "fetch_figure", "arguments": {"document_id": hb, "label": "Figure 1"}},
             {"name": "fetch_section", "arguments": {"document_id": hb, "section": "Dress code"}}]
    with FakeOpenAI(fetching_responder(*calls)) as fake:
        a = _llm(base, fake).answer("What are the core hours?", OURS)
    assert [r["content"] for r in tool_results(fake.requests[1])] == [
        "Error: there is no tool 'delete_everything'.",
        f"{HANDBOOK} has 14 pages; there is no page 99.",
        f"There is no Figure 1 in {HANDBOOK}; the outline lists the labels that exist.",
        f"{HANDBOOK} has no section 'Dress code'; the outline lists its sections.",
    ]
    assert a.mode == "llm" and a.citations  # answered from the passages it had


def test_triage_off_sends_no_tools(base):
    with FakeOpenAI() as fake:
        a = _llm(base, fake, llm_max_tool_calls=0).answer("What are the core hours?", OURS)
    assert a.mode == "llm" and len(fake.requests) == 1 and "tools" not in fake.requests[0]


def test_triage_needs_at_least_one_call(base):
    with pytest.raises(ValueError, match="max_tool_calls"):
        Triage(store=base.store, router=None, search=lambda q, s, f: [], max_tool_calls=0)


def test_gathering_only_the_answer_is_generated_afterwards_from_the_passages_and_what_was_fetched(base, ids):
    """A caller that streams the answer (``answer_in_loop=False``): tool rounds first, then the generation as
    without triage, its passages grown by what the model fetched."""
    hb, _ = ids
    fetched: list[str] = []

    def model(request):
        if request.get("tools"):
            if not tool_results(request):
                return fetching_responder({"name": "fetch_section",
                                           "arguments": {"document_id": hb, "section": "6"}})(request)
            fetched.extend(cid for cid, _ in fetched_passages(request))
            return json.dumps({"done": True})
        chunk_id, text = next((c, t) for c, t in passages_in(request) if c in fetched)
        return json.dumps({"answerable": True, "answer": "Section 6 is about travel [1].",
                           "citations": [{"n": 1, "chunk_id": chunk_id, "quote": text.split("\n")[1].split(". ")[0]}]})

    with FakeOpenAI(model) as fake:
        svc = _llm(base, fake)
        svc.query.triage.answer_in_loop = False
        a = svc.answer("What does the handbook cover right after the remote work rules?", OURS)
    assert [bool(r.get("tools")) for r in fake.requests] == [True, True, False]
    assert '{"done": true}' in fake.requests[0]["messages"][0]["content"]
    assert a.mode == "llm" and a.text == "Section 6 is about travel [1]."
    assert (a.citations[0].page_start, a.citations[0].section) == (8, "6 Travel and Expenses")


@pytest.mark.parametrize(("section", "sid", "held"), [
    ("3", "III", True), ("3", "3.4", True), ("III", "3.4", True), ("III", "III", True), ("4", "4.2", True),
    ("1", "12", False), ("1", "12.1", False), ("IV", "VI", False), ("12", "12.2", True),
])
def test_a_section_number_holds_itself_its_subsections_and_its_roman_spelling(section, sid, held):
    from pipelines.triage import _section_id_matches

    assert _section_id_matches(sid, section) is held
