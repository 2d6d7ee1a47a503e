"""``citebot bench vectors``: page-hit@5 and shared hits per vector format, on a small real store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from haystack import Document

from connectors.sqlite_store import SQLiteDocumentStore
from eval.bench.vectors import Item, compare, load_items


def _store(path: Path) -> tuple[SQLiteDocumentStore, np.ndarray]:
    rng = np.random.default_rng(4)
    vecs = rng.standard_normal((1200, 64)).astype(np.float32)
    store = SQLiteDocumentStore(path, embedding_dim=64)
    for s, scope in enumerate(("eval:doc:a", "eval:doc:b")):
        store.write_documents([
            Document(id=f"{scope}:{i}", content=f"page {i // 3 + 1} words {'alpha' if i == 7 else 'beta'}",
                     embedding=vecs[s * 600 + i].tolist(),
                     meta={"scope": scope, "file_name": f"{scope[-1]}.pdf", "doc_id": scope, "page_start": i // 3 + 1,
                           "page_end": i // 3 + 1, "sha256": f"sha-{scope[-1]}"})
            for i in range(600)])
    return store, vecs


def test_page_hits_and_shared_hits_per_format_per_file_and_across_files(tmp_path: Path) -> None:
    store, vecs = _store(tmp_path / "s.sqlite3")
    items = [Item("alpha?", "eval:doc:a", frozenset({3})),  # chunk 7 is on page 3
             Item("where?", "eval:doc:b", frozenset({200}))]  # page 200: chunks 597-599
    near = [vecs[7] + 0.05, vecs[600 + 598] + 0.05]
    got = compare(store, items, [v.tolist() for v in near], ["float32", "binary"])
    for setting in ("per file", "all files"):
        exact, binary = got[setting]["float32"], got[setting]["binary"]
        assert exact["dense_page_hit@5"] == 1.0 and exact["hybrid_page_hit@5"] == 1.0
        assert exact["dense_top10_shared"] == 1.0  # the reference against itself
        assert binary["dense_page_hit@5"] == 1.0 and binary["dense_top10_shared"] >= 0.8
    far = compare(store, items[:1], [vecs[600 + 10].tolist()], ["float32"])  # a vector of the other document
    assert far["all files"]["float32"]["dense_page_hit@5"] == 0.0
    store.close()


def test_cases_are_found_by_file_name_or_by_the_pdfs_hash(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "s.sqlite3")
    cases = tmp_path / "cases.jsonl"
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    (pdfs / "ACME_10K.pdf").write_bytes(b"%PDF-b")
    conn = store._conn()  # noqa: SLF001
    import hashlib

    sha = hashlib.sha256(b"%PDF-b").hexdigest()
    with store._write() as w:  # noqa: SLF001 - the index as --neutral-names leaves it: b.pdf holds ACME_10K.pdf
        w.execute("UPDATE chunks SET meta = json_set(meta, '$.sha256', ?) WHERE scope = 'eval:doc:b'", (sha,))
    assert conn.execute("SELECT count(*) FROM chunks WHERE json_extract(meta, '$.sha256') = ?", (sha,)).fetchone()[0]
    rows = [{"question": "q1", "answerable": True, "sources": [{"doc": "a.pdf", "pages": [2]}]},
            {"question": "q2", "answerable": True, "sources": [{"doc": "ACME_10K.pdf", "pages": [4, 5]}]},
            {"question": "q3", "answerable": False, "sources": []},
            {"question": "q4", "answerable": True, "sources": [{"doc": "missing.pdf", "pages": [1]}]}]
    cases.write_text("\n".join(json.dumps(r) for r in rows))
    items, answerable = load_items(store, cases, pdfs)
    assert answerable == 3
    assert items == [Item("q1", "eval:doc:a", frozenset({2})), Item("q2", "eval:doc:b", frozenset({4, 5}))]
    store.close()
