"""OpenTelemetry traces of a question and an upload: one span per pipeline step, never any text.

Off by default: :func:`span` then costs one no-op context manager. ``CITEBOT_OTLP_ENDPOINT`` (an OTLP/HTTP
traces URL, e.g. ``http://otel-collector:4318/v1/traces``) turns it on for the bots (:func:`configure_tracing`);
tests pass an in-memory exporter to :func:`enable`.

All spans go through Haystack's tracer (``haystack.tracing``) with deepset's OpenTelemetry integration
(``opentelemetry-haystack``). Neither path runs ``Pipeline.run`` (its copies of every input cost CPU for
nothing): the indexer opens a ``haystack.component.run`` span per component as ``Pipeline.run`` would, and the
query path opens the same kind of spans with :func:`span`. One rule holds for both: a span carries only the
attributes in :data:`ALLOWED_TAGS` (names, counts, scores, outcomes). Haystack's own pipeline span would record
the whole pipeline input, the uploaded PDF's bytes included, and its content tags the question and passages;
:class:`_SafeTracer` drops every tag not on the list, whatever ``HAYSTACK_CONTENT_TRACING_ENABLED`` says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from haystack import tracing as haystack_tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from connectors.settings import Settings

# What a span may say: ids of steps, counts, scores and outcomes. Never a question, passage, quote, file name,
# channel or user.
ALLOWED_TAGS = frozenset({
    "haystack.component.name", "haystack.component.type", "haystack.component.visits",
    "haystack.pipeline.execution_mode",
    "citebot.platform", "citebot.retrieval_mode", "citebot.k", "citebot.answer_mode", "citebot.refused",
    "citebot.refusal_reason", "citebot.confidence", "citebot.n_retrieved", "citebot.n_routed",
    "citebot.n_citations", "citebot.n_documents", "citebot.n_hits", "citebot.explicit_reference",
    "citebot.validation.exact", "citebot.validation.normalised", "citebot.validation.fuzzy",
    "citebot.validation.unknown_chunk", "citebot.validation.unmatched", "citebot.validation.retried",
    "citebot.retried", "citebot.n_tool_calls",
    "citebot.ingest.status", "citebot.ingest.reason", "citebot.ingest.pages", "citebot.ingest.ocr_pages",
    "citebot.ingest.chunks", "citebot.ingest.bytes",
})

_provider: TracerProvider | None = None


def span(name: str, **tags: Any) -> contextlib.AbstractContextManager[haystack_tracing.Span]:
    """A span named ``name`` (``citebot.`` is prefixed) around a step; ``tags`` must be in :data:`ALLOWED_TAGS`
    once prefixed with ``citebot.``. A no-op while tracing is off."""
    return haystack_tracing.tracer.trace(f"citebot.{name}", tags={f"citebot.{k}": v for k, v in tags.items()})


def tag(s: haystack_tracing.Span, **tags: Any) -> None:
    """Set ``citebot.``-prefixed tags on an open span (outcomes known only at its end)."""
    s.set_tags({f"citebot.{k}": v for k, v in tags.items()})


class _SafeSpan(haystack_tracing.Span):
    def __init__(self, inner: haystack_tracing.Span) -> None:
        self._inner = inner

    def set_tag(self, key: str, value: Any) -> None:
        if key in ALLOWED_TAGS:
            self._inner.set_tag(key, value)

    def set_content_tag(self, key: str, value: Any) -> None:
        return  # question, passages, answers: never

    def raw_span(self) -> Any:
        return self._inner.raw_span()

    def get_correlation_data_for_logs(self) -> dict[str, Any]:
        return self._inner.get_correlation_data_for_logs()


class _SafeTracer(haystack_tracing.Tracer):
    """Haystack's OpenTelemetry tracer with every tag outside :data:`ALLOWED_TAGS` dropped."""

    def __init__(self, inner: haystack_tracing.Tracer) -> None:
        self._inner = inner

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: haystack_tracing.Span | None = None
    ) -> Iterator[haystack_tracing.Span]:
        safe = {k: v for k, v in (tags or {}).items() if k in ALLOWED_TAGS}
        with self._inner.trace(operation_name, tags=safe, parent_span=parent_span) as inner:
            yield _SafeSpan(inner)

    def current_span(self) -> haystack_tracing.Span | None:
        current = self._inner.current_span()
        return _SafeSpan(current) if current is not None else None


def enable(exporter: SpanExporter, *, service_name: str = "citebot", batch: bool = True) -> TracerProvider:
    """Send every span to ``exporter`` (batched, or one by one with ``batch=False``: tests); returns the provider
    (its ``shutdown()`` flushes what is pending)."""
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    global _provider
    disable()
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    haystack_tracing.tracer.is_content_tracing_enabled = False
    haystack_tracing.enable_tracing(_SafeTracer(OpenTelemetryTracer(provider.get_tracer("citebot"))))
    _provider = provider
    return provider


def disable() -> None:
    """Tracing off (and what was pending flushed)."""
    global _provider
    haystack_tracing.disable_tracing()
    if _provider is not None:
        _provider.shutdown()
        _provider = None


def configure_tracing(settings: Settings, *, service_name: str) -> bool:
    """Export spans over OTLP/HTTP to ``CITEBOT_OTLP_ENDPOINT`` when it is set; True when tracing is on. The
    exporter also reads OpenTelemetry's own ``OTEL_EXPORTER_OTLP_HEADERS`` (an API key for a hosted backend)."""
    if not settings.otlp_endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    enable(OTLPSpanExporter(endpoint=settings.otlp_endpoint, timeout=10), service_name=service_name)
    return True
