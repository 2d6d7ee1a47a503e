"""Traces of a question and an upload: one span per pipeline step, in one trace, and never any text.

The real service (SQLite store, embedding model, extractive answers) over a PDF made here; spans are collected
by OpenTelemetry's in-memory exporter, as an OTLP collector would receive them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from connectors import tracing
from connectors.settings import Settings
from pipelines.service import CitebotService
from tests.helpers.pdfs import make_pdf

pytestmark = pytest.mark.slow

SECRET_LINE = "Employees may take eighteen weeks of paid parental leave after the birth of a child."
PAGES = [["1 Introduction", "This handbook describes how Halvard Logistics treats its employees."],
         ["4 Leave", "4.2 Parental leave", SECRET_LINE]]
QUESTION = "How many weeks of parental leave do employees get?"
FILE_NAME = "confidential_handbook.pdf"
SCOPE = "slack:T0:C0SECRET"

# the steps of QueryEngine.answer in hybrid mode, each once (see pipelines/query.py)
QUESTION_STEPS = ["citebot.answer", "citebot.rewrite", "citebot.analyze", "citebot.route", "citebot.embed",
                  "citebot.retrieve_dense", "citebot.retrieve_bm25", "citebot.fuse", "citebot.rank_pages",
                  "citebot.extract", "citebot.confidence", "citebot.decide", "citebot.validate"]
INGEST_COMPONENTS = ["reader", "identity", "structure", "chunker", "embedder", "writer"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> CitebotService:
    settings = Settings(_env_file=None, data_dir=tmp_path_factory.mktemp("data"), ocr_enabled=False)  # type: ignore[call-arg]
    svc = CitebotService(settings)
    svc.warm_up()
    return svc


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    tracing.enable(exp, batch=False)
    yield exp
    tracing.disable()


def _strings(span: ReadableSpan) -> list[str]:
    return [str(v) for v in (span.attributes or {}).values()] + [span.name]


def _assert_no_text(spans: tuple[ReadableSpan, ...], *texts: str) -> None:
    for s in spans:
        for key in s.attributes or {}:
            assert key in tracing.ALLOWED_TAGS, f"{s.name} carries {key}"
        for value in _strings(s):
            for text in texts:
                for word in ("eighteen", "parental", "Halvard", "confidential", "C0SECRET", text[:30]):
                    assert word not in value, f"{s.name} carries text: {value[:120]}"


def test_a_question_has_one_span_per_step_in_one_trace_and_no_text(
    service: CitebotService, exporter: InMemorySpanExporter
) -> None:
    service.ingest(make_pdf(PAGES), file_name=FILE_NAME, scope=SCOPE)
    exporter.clear()
    answer = service.answer(QUESTION, [SCOPE])
    assert not answer.refused and "eighteen" in answer.citations[0].quote

    spans = exporter.get_finished_spans()
    counts = Counter(s.name for s in spans)
    for step in QUESTION_STEPS:
        assert counts[step] == 1, f"{step}: {counts[step]} spans ({sorted(counts)})"
    assert set(counts) <= {*QUESTION_STEPS, "citebot.route_headings"}, sorted(counts)
    (root,) = [s for s in spans if s.name == "citebot.answer"]
    assert root.parent is None
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    by_id = {s.context.span_id: s for s in spans}
    for s in spans:  # every step hangs under the answer
        parent = s
        while parent.parent is not None:
            parent = by_id[parent.parent.span_id]
        assert parent is root
    attrs: dict[str, Any] = dict(root.attributes or {})
    assert attrs["citebot.refused"] is False and attrs["citebot.answer_mode"] == "extractive"
    assert attrs["citebot.confidence"] == pytest.approx(answer.confidence, abs=1e-3)
    assert attrs["citebot.validation.exact"] == len(answer.citations) >= 1
    assert attrs["citebot.n_citations"] == len(answer.citations)
    retrieve = next(s for s in spans if s.name == "citebot.retrieve_bm25")
    assert (retrieve.attributes or {})["citebot.n_hits"] >= 1
    _assert_no_text(spans, QUESTION, SECRET_LINE)


def test_a_refusal_says_why(service: CitebotService, exporter: InMemorySpanExporter) -> None:
    service.ingest(make_pdf(PAGES), file_name=FILE_NAME, scope=SCOPE)
    exporter.clear()
    answer = service.answer("What is the boiling point of tungsten on Mars?", [SCOPE])
    assert answer.refused
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "citebot.answer"]
    assert (root.attributes or {})["citebot.refused"] is True
    assert (root.attributes or {})["citebot.refusal_reason"] in ("below_threshold", "no_quotable_passage")


def test_an_upload_traces_each_indexing_component_without_the_pdf(
    service: CitebotService, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    data = make_pdf([*PAGES, ["Appendix", "Parking spaces are allocated by seniority."]])
    result = service.ingest(data, file_name=FILE_NAME, scope=SCOPE)
    assert result.status == "indexed"
    spans = exporter.get_finished_spans()
    components = [str((s.attributes or {}).get("haystack.component.name")) for s in spans
                  if s.name == "haystack.component.run"]
    assert sorted(components) == sorted(INGEST_COMPONENTS)
    (root,) = [s for s in spans if s.name == "citebot.ingest"]
    # an ingest is prepared (reader to embedder) and then committed (the writer): two runs, both under the ingest
    runs = [s for s in spans if s.name == "haystack.pipeline.run"]
    assert len(runs) == 2
    assert all(run.parent is not None and run.parent.span_id == root.context.span_id for run in runs)
    attrs = dict(root.attributes or {})
    assert (attrs["citebot.ingest.status"], attrs["citebot.ingest.pages"]) == ("indexed", 3)
    assert attrs["citebot.ingest.chunks"] == result.chunks and attrs["citebot.ingest.bytes"] == len(data)
    # Haystack's own pipeline span would carry the whole input, the PDF's bytes among it: dropped
    assert all("haystack.pipeline.input_data" not in (s.attributes or {}) for s in spans)
    assert sum(len(v) for s in spans for v in _strings(s)) < 4000  # names and numbers, not a document
    _assert_no_text(spans, SECRET_LINE, "Parking spaces")


def test_tracing_is_off_by_default_and_an_endpoint_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from haystack import tracing as haystack_tracing

    assert not haystack_tracing.is_tracing_enabled()
    assert tracing.configure_tracing(Settings(_env_file=None), service_name="t") is False  # type: ignore[call-arg]
    assert not haystack_tracing.is_tracing_enabled()
    settings = Settings(_env_file=None, otlp_endpoint="http://127.0.0.1:9/v1/traces")  # type: ignore[call-arg]
    try:
        assert tracing.configure_tracing(settings, service_name="t") is True
        assert haystack_tracing.is_tracing_enabled()
    finally:
        tracing.disable()
    assert not haystack_tracing.is_tracing_enabled()
