"""Reading an uploaded PDF: the guard, the text layer, OCR. The only code that parses untrusted bytes.

Plain functions on bytes and :mod:`pipelines.reading.layout` types; nothing here imports Haystack (whose
import pulls in torch: ~7 s and ~700 MB of address space), so this part of indexing can run in a small
process of its own (:class:`pipelines.components.isolated_reader.IsolatedPdfReader`). The benchmarks time each
step on its own through the thin components of :mod:`eval.bench.reading`.
"""
