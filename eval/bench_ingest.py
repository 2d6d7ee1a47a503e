"""``citebot bench ingest PATH... [--json]``: indexing speed and memory, next to a naive Haystack baseline.

Per run, over the given PDFs (files or folders):

* parse+structure+chunk pages/s (guard, pdfium parser, structure, chunker; no OCR, no embedding),
* OCR s/page on the pages that need it (when the inputs have none, the sample handbook's scanned
  page is OCR'd so the number is always there; the report says which),
* embedding chunks/s of our chunks (section path + text, the configured threads/batch size),
* end-to-end pages/s of ``Indexer.ingest`` into a fresh temporary store,
* peak RSS of the process after our pipeline (``ru_maxrss``), before the baseline runs,
* the naive baseline in the same run: Haystack ``PyPDFToDocument`` + ``DocumentSplitter`` cutting
  800-character windows with 150 characters of overlap + the same embedder.

Wall-clock and CPU seconds are both reported: these machines are shared, and CPU time is the
steadier number when other work runs. ``--synthetic-pages N`` adds a generated N-page text PDF
(e.g. 500 for the memory target). Targets (issue 3): parse+chunk >= 30 pages/s on text PDFs;
end-to-end >= 5 pages/s on a 100-page text PDF; OCR <= 2 s/page; peak RSS <= 1.5 GB at 500 pages.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from connectors.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser("ingest", help="indexing speed and peak memory vs a naive Haystack baseline")
    p.add_argument("paths", nargs="*", metavar="PATH", help="PDF files or folders (default: the sample PDFs)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--synthetic-pages", type=int, default=0, help="also generate and index an N-page text PDF")
    p.add_argument("--no-baseline", action="store_true", help="skip the naive baseline")
    p.set_defaults(func=run_bench)


def synthetic_pdf(pages: int) -> bytes:
    """A long text-only report: numbered sections, paragraphs, a running footer (deterministic)."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    words = [
        "the", "committee", "reviewed", "quarterly", "operating", "results", "budget", "variance",
        "supplier", "contracts", "maintenance", "schedule", "safety", "incidents", "staffing", "levels",
        "regional", "offices", "capital", "expenditure", "forecast", "revenue", "customer", "retention",
        "training", "programme", "compliance", "audit", "findings", "recommendations",
    ]
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, invariant=1)
    w, h = A4
    n = 0
    for page in range(1, pages + 1):
        c.setFont("Helvetica", 8)
        c.drawString(72, 30, f"Annual operations report  -  page {page}")
        y = h - 72
        c.setFont("Helvetica-Bold", 13)
        c.drawString(72, y, f"{page} Operations review part {page}")
        y -= 24
        c.setFont("Times-Roman", 10.5)
        for line in range(44):
            text = " ".join(words[(n + k * 7) % len(words)] for k in range(14))
            n += 3
            c.drawString(72, y, text.capitalize() + ("." if line % 5 == 4 else ""))
            y -= 14
            if line % 5 == 4:
                y -= 6
            if y < 60:
                break
        c.showPage()
    c.save()
    return buf.getvalue()


def _collect(paths: list[str], synthetic_pages: int) -> list[tuple[str, bytes]]:
    from eval import sample_pdfs

    out: list[tuple[str, bytes]] = []
    for raw in paths:
        p = Path(raw)
        files = sorted(q for q in p.rglob("*.pdf")) if p.is_dir() else [p]
        out.extend((f.name, f.read_bytes()) for f in files if f.is_file())
    if not paths:
        out.extend((name, sample_pdfs.sample_bytes(name)) for name in sample_pdfs.SAMPLE_FILES)
    if synthetic_pages:
        out.append((f"synthetic-{synthetic_pages}-pages.pdf", synthetic_pdf(synthetic_pages)))
    return out


class _Clock:
    def __enter__(self) -> _Clock:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def _rate(n: float, seconds: float) -> float | None:
    return round(n / seconds, 2) if seconds > 0 else None


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def run_bench(args: argparse.Namespace, settings: Settings) -> int:  # noqa: PLR0915 - one linear report
    from pipelines.components.chunker import StructureChunker
    from pipelines.components.embedder import PassageEmbedder
    from pipelines.components.layout import IngestError
    from pipelines.components.ocr import OcrFallback
    from pipelines.components.pdf_guard import PdfGuard
    from pipelines.components.pdf_parser import PdfParser
    from pipelines.components.structure import StructureDetector

    inputs = _collect(args.paths, args.synthetic_pages)
    if not inputs:
        print("citebot bench ingest: no PDFs found", file=sys.stderr)
        return 2
    model_path = str(settings.resolved_model_path)
    guard = PdfGuard(max_file_mb=settings.max_file_mb, max_pages=settings.max_pages)
    parser = PdfParser(ocr_min_chars=settings.ocr_min_chars)
    structure = StructureDetector()
    chunker = StructureChunker(
        model_path=model_path, max_tokens=settings.chunk_max_tokens, min_tokens=settings.chunk_min_tokens
    )
    chunker.warm_up()
    embedder = PassageEmbedder(
        model_path=model_path, threads=settings.torch_threads, batch_size=settings.embedding_batch_size
    )
    embedder.warm_up()

    # 1. parse + structure + chunk (text layer only)
    parse_pages, chunks_all, ocr_todo, refused = 0, [], [], []
    with _Clock() as parse_clock:
        for name, data in inputs:
            try:
                guard.run(data)
                parsed = parser.run(data)["parsed"]
            except IngestError as e:
                refused.append({"file": name, "reason": e.reason})
                continue
            parse_pages += parsed.page_count
            ocr_todo.append((data, parsed))
            elements = structure.run(parsed)["elements"]
            chunks_all += chunker.run(elements, doc_id="bench", file_name=name, scope="bench")["documents"]

    # 2. OCR on the pages that need it (or the sample scan)
    ocr = OcrFallback(enabled=True, dpi=settings.ocr_dpi, language=settings.ocr_language,
                      page_timeout_s=settings.ocr_page_timeout_s)
    ocr_source = "inputs"
    if not any(p.needs_ocr for _, parsed in ocr_todo for p in parsed.pages):
        from eval import sample_pdfs

        data = sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)
        ocr_todo = [(data, parser.run(data)["parsed"])]
        ocr_source = "sample handbook scan (inputs have no image-only pages)"
    ocr_pages = sum(1 for _, parsed in ocr_todo for p in parsed.pages if p.needs_ocr)
    with _Clock() as ocr_clock:
        for data, parsed in ocr_todo:
            ocr.run(data, parsed)

    # 3. embedding of our chunks
    with _Clock() as embed_clock:
        embedder.run(chunks_all)

    # 4. end to end into a fresh store
    from connectors.stores import open_store
    from pipelines.indexing import Indexer

    e2e_pages = 0
    e2e_chunks = 0
    with tempfile.TemporaryDirectory() as tmp:
        e2e_settings = settings.model_copy(update={"data_dir": Path(tmp)})
        indexer = Indexer(e2e_settings, open_store(e2e_settings))
        indexer.warm_up()
        with _Clock() as e2e_clock:
            for name, data in inputs:
                res = indexer.ingest(data, file_name=name, scope="bench")
                if res.status == "indexed":
                    e2e_pages += res.pages
                    e2e_chunks += res.chunks
    rss_ours = _peak_rss_mb()

    results: dict[str, Any] = {
        "inputs": [{"file": n, "bytes": len(d)} for n, d in inputs],
        "refused": refused,
        "settings": {"torch_threads": settings.torch_threads, "batch_size": settings.embedding_batch_size,
                     "chunk_max_tokens": settings.chunk_max_tokens, "ocr_dpi": settings.ocr_dpi},
        "parse_structure_chunk": {"pages": parse_pages, "chunks": len(chunks_all),
                                  "wall_s": round(parse_clock.wall, 2), "cpu_s": round(parse_clock.cpu, 2),
                                  "pages_per_s": _rate(parse_pages, parse_clock.wall),
                                  "pages_per_cpu_s": _rate(parse_pages, parse_clock.cpu)},
        "ocr": {"pages": ocr_pages, "source": ocr_source,
                "s_per_page": round(ocr_clock.wall / ocr_pages, 2) if ocr_pages else None},
        "embedding": {"chunks": len(chunks_all), "wall_s": round(embed_clock.wall, 2),
                      "cpu_s": round(embed_clock.cpu, 2),
                      "chunks_per_s": _rate(len(chunks_all), embed_clock.wall),
                      "chunks_per_cpu_s": _rate(len(chunks_all), embed_clock.cpu)},
        "end_to_end": {"pages": e2e_pages, "chunks": e2e_chunks, "wall_s": round(e2e_clock.wall, 2),
                       "cpu_s": round(e2e_clock.cpu, 2), "pages_per_s": _rate(e2e_pages, e2e_clock.wall),
                       "pages_per_cpu_s": _rate(e2e_pages, e2e_clock.cpu)},
        "peak_rss_mb": rss_ours,
    }
    if not args.no_baseline:
        results["baseline"] = _baseline(inputs, settings, pages=parse_pages)
    _print(results, as_json=args.json)
    return 0


def _baseline(inputs: list[tuple[str, bytes]], settings: Settings, *, pages: int) -> dict[str, Any]:
    """Haystack PyPDFToDocument + DocumentSplitter (800 chars, 150 overlap) + the same embedder.

    ``pages`` is the page count of the same inputs (pdfium's), so the rates compare like for like.
    """
    import logging

    from haystack.components.converters import PyPDFToDocument
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.dataclasses import ByteStream

    from connectors.embedding import embed

    logging.getLogger("pypdf").setLevel(logging.ERROR)

    def windows(text: str) -> list[str]:
        return [text[i:i + 800] for i in range(0, max(len(text) - 150, 1), 800 - 150)]

    converter = PyPDFToDocument()
    splitter = DocumentSplitter(split_by="function", splitting_function=windows, split_length=1)
    if hasattr(splitter, "warm_up"):
        splitter.warm_up()
    chunks = []
    with _Clock() as conv:
        for name, data in inputs:
            out = converter.run(sources=[ByteStream(data=data, meta={"file_name": name})])
            chunks += splitter.run(documents=out["documents"])["documents"]
    with _Clock() as emb:
        embed([c.content or "" for c in chunks], path=settings.resolved_model_path, threads=settings.torch_threads,
              batch_size=settings.embedding_batch_size)
    total = conv.wall + emb.wall
    return {
        "convert_split_cpu_s": round(conv.cpu, 2),
        "embedding_cpu_s": round(emb.cpu, 2),
        "end_to_end_pages_per_cpu_s": _rate(pages, conv.cpu + emb.cpu),
        "pages": pages,
        "chunks": len(chunks),
        "convert_split_wall_s": round(conv.wall, 2),
        "convert_split_pages_per_s": _rate(pages, conv.wall),
        "embedding_wall_s": round(emb.wall, 2),
        "embedding_chunks_per_s": _rate(len(chunks), emb.wall),
        "end_to_end_pages_per_s": _rate(pages, total),
        "mean_chunk_chars": round(sum(len(c.content or "") for c in chunks) / len(chunks), 1) if chunks else 0,
    }


def _print(results: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(results, indent=2))
        return
    p, o, e, x = results["parse_structure_chunk"], results["ocr"], results["embedding"], results["end_to_end"]
    print(f"inputs: {len(results['inputs'])} PDFs, refused: {len(results['refused'])}")
    print(f"parse+structure+chunk: {p['pages']} pages -> {p['chunks']} chunks in {p['wall_s']} s "
          f"= {p['pages_per_s']} pages/s ({p['pages_per_cpu_s']} pages per CPU-s)   target >= 30")
    print(f"OCR: {o['pages']} pages, {o['s_per_page']} s/page ({o['source']})   target <= 2")
    print(f"embedding: {e['chunks']} chunks in {e['wall_s']} s = {e['chunks_per_s']} chunks/s "
          f"({e['chunks_per_cpu_s']} per CPU-s)")
    print(f"end to end: {x['pages']} pages, {x['chunks']} chunks in {x['wall_s']} s = {x['pages_per_s']} pages/s "
          f"({x['pages_per_cpu_s']} per CPU-s)   target >= 5 on a 100-page text PDF")
    print(f"peak RSS after our pipeline: {results['peak_rss_mb']} MB   target <= 1536 at 500 pages")
    b = results.get("baseline")
    if b:
        print(f"baseline (PyPDFToDocument + 800/150 char splitter + same embedder): {b['pages']} pages -> "
              f"{b['chunks']} chunks; convert+split {b['convert_split_pages_per_s']} pages/s, embedding "
              f"{b['embedding_chunks_per_s']} chunks/s, end to end {b['end_to_end_pages_per_s']} pages/s "
              f"({b['end_to_end_pages_per_cpu_s']} per CPU-s)")
