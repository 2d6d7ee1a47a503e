"""The naive page retriever: ``citebot eval run --mode pages``, the floor Citebot's retrieval must beat.

One "chunk" per page, holding the page's whole text as Citebot reads it (text layer, OCR where the page has
none: :func:`pipelines.reading.reader.read_pdf` with the same settings as indexing), embedded by the same
embedding connector the product uses (all-MiniLM-L6-v2 by default, which reads a text's first 256 word pieces)
and searched by cosine similarity alone: no BM25, no structure, no routing. Questions are scoped exactly as in
the other modes (:meth:`eval.index.EvalIndex.scopes_for`), so page-hit@5 is comparable row by row.

The page vectors are built once per eval index and kept beside it (``<index>/page_baseline/``); the index key
already covers the PDFs, the reading settings and the embedding model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectors.embedding import get_encoder
from connectors.settings import Settings
from eval.records import Hit

FOLDER = "page_baseline"


@dataclass(frozen=True)
class Page:
    file: str
    scope: str
    number: int  # 1-based
    text: str


def read_pages(data: bytes, settings: Settings) -> list[str]:
    """Each page's whole text (its lines in reading order), as the indexer reads the PDF."""
    from pipelines.reading.ocr import OcrOptions
    from pipelines.reading.reader import ReadOptions, read_pdf

    options = ReadOptions(
        max_file_mb=settings.max_file_mb, max_pages=settings.max_pages, max_stream_mb=settings.max_stream_mb,
        max_total_inflated_mb=settings.max_decoded_mb, ocr_min_chars=settings.ocr_min_chars,
        ocr=OcrOptions(enabled=settings.ocr_enabled, dpi=settings.ocr_dpi, language=settings.ocr_language,
                       page_timeout_s=settings.ocr_page_timeout_s),
    )
    parsed = read_pdf(data, options)
    return ["\n".join(line.text for line in page.lines) for page in parsed.pages]


class PageBaseline:
    """Dense search over whole pages. Build with :meth:`build`; ask with :meth:`search`.

    Usage::

        baseline = PageBaseline.build(settings, pdfs, scopes, index_path)
        hits = baseline.search("what is the FY2020 free cash flow?", ["eval:doc:..."], k=10)
    """

    def __init__(self, pages: list[Page], vectors: np.ndarray, settings: Settings) -> None:
        if len(pages) != len(vectors):
            raise ValueError("one vector per page")
        self.pages = pages
        self.vectors = vectors.astype(np.float32, copy=False)
        self.scopes = np.array([p.scope for p in pages], dtype=object)
        self._encoder = _encoder(settings)

    @classmethod
    def build(cls, settings: Settings, pdfs: Sequence[Path], scopes: dict[str, str], index_path: Path, *,
              log: Callable[[str], None] = print, names: Mapping[str, str] | None = None) -> PageBaseline:
        """Read and embed every page of ``pdfs`` (each in its ``scopes[name]``; ``names``: the name each PDF was
        indexed under, ``--neutral-names``), or load them from an earlier run over the same index. A PDF that cannot
        be read contributes no page (its cases can only miss)."""
        folder = index_path / FOLDER
        pages_file, vectors_file = folder / "pages.json", folder / "vectors.npy"
        if pages_file.exists() and vectors_file.exists():
            pages = [Page(**p) for p in json.loads(pages_file.read_text(encoding="utf-8"))]
            return cls(pages, np.load(vectors_file), settings)
        pages = []
        for pdf in pdfs:
            try:
                texts = read_pages(pdf.read_bytes(), settings)
            except Exception as e:  # noqa: BLE001 - reported, the baseline goes on without the PDF
                log(f"pages baseline: {pdf.name} could not be read ({type(e).__name__}); its pages are left out")
                continue
            name = (names or {}).get(pdf.name, pdf.name)
            pages += [Page(name, scopes[name], n, t) for n, t in enumerate(texts, 1)]
        log(f"pages baseline: embedding {len(pages)} pages")
        dim = settings.embedding_dim
        vectors = (_encoder(settings).encode([p.text for p in pages], settings.embedding_batch_size)
                   if pages else np.zeros((0, dim), dtype=np.float32))
        folder.mkdir(parents=True, exist_ok=True)
        np.save(vectors_file, np.asarray(vectors, dtype=np.float32))
        pages_file.write_text(json.dumps([p.__dict__ for p in pages]), encoding="utf-8")
        return cls(pages, np.asarray(vectors), settings)

    def search(self, question: str, scopes: Sequence[str], k: int) -> list[Hit]:
        """The ``k`` pages in ``scopes`` most similar to ``question``, best first, as eval hits."""
        mask = np.isin(self.scopes, list(scopes))
        idx = np.flatnonzero(mask)
        if not len(idx):
            return []
        q = np.asarray(self._encoder.encode([question]), dtype=np.float32)[0]
        sims = self.vectors[idx] @ q
        order = idx[np.argsort(-sims, kind="stable")[:k]]
        out = []
        for i in order:
            p = self.pages[i]
            out.append(Hit(chunk_id=f"{p.file}#page={p.number}", file=p.file, page_start=p.number,
                           page_end=p.number, score=float(self.vectors[i] @ q)))
        return out


def _encoder(settings: Settings) -> Any:
    return get_encoder(settings.resolved_model_path, settings.torch_threads, backend=settings.embedding_backend,
                       models_dir=settings.resolved_models_dir, dim=settings.embedding_dim)
