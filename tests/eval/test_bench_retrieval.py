"""``citebot bench retrieval``: its streamed corpus and its report."""

from __future__ import annotations

import argparse
import json

import numpy as np

from connectors.settings import Settings
from eval.bench.retrieval import BATCH_DOCS, CHUNKS_PER_DOC, Corpus, pick_queries


def test_the_corpus_is_made_a_batch_at_a_time_whatever_its_size():
    corpus = Corpus(2_000_000, 20, 384, seed=7)
    first, docs = next(corpus.batches())  # two million chunks are never made at once
    assert first == 0 and len(docs) == BATCH_DOCS
    assert all(len(texts) == CHUNKS_PER_DOC and vecs.shape == (CHUNKS_PER_DOC, 384) for _, _, texts, vecs in docs)
    assert np.allclose(np.linalg.norm(docs[0][3], axis=1), 1.0, atol=1e-5)


def test_the_corpus_is_the_same_on_every_pass_with_every_chunk_once_and_5_percent_in_the_first_scope():
    corpus = Corpus(12_345, 20, 8, seed=3)
    passes = [[(s, d, t, v.tobytes()) for _, docs in corpus.batches() for s, d, t, v in docs] for _ in range(2)]
    assert passes[0] == passes[1]
    assert sum(len(t) for _, _, t, _ in passes[0]) == 12_345
    assert len({d for _, d, _, _ in passes[0]}) == len(passes[0])  # a document is written once, whole
    assert abs(corpus.chunks_in(corpus.scopes[0]) / 12_345 - 0.05) < 0.01
    assert {s for s, _, _, _ in passes[0]} == set(corpus.scopes)


def test_queries_point_near_chunks_of_the_corpus():
    corpus = Corpus(1_000, 4, 16, seed=1)
    vecs = np.concatenate([v for _, docs in corpus.batches() for _, _, _, v in docs])
    queries = pick_queries(corpus, 5)
    assert pick_queries(corpus, 5) == queries
    for text, q in queries:
        assert text.endswith("?")
        assert float((vecs @ np.asarray(q, dtype=np.float32)).max()) > 0.95  # the chunk it was made from


def test_the_report_has_every_kind_scoped_and_not_per_vector_format_and_a_kept_store_is_reused(tmp_path, capsys):
    from connectors.log import configure_logging
    from eval.bench import retrieval

    configure_logging("warning")  # as the command line does: the report alone on stdout
    parser = argparse.ArgumentParser()
    retrieval.register(parser.add_subparsers())
    store = tmp_path / "bench.sqlite3"
    argv = ["retrieval", "--chunks", "600", "--queries", "5", "--scopes", "4", "--skip-memory", "--json",
            "--store", str(store), "--vectors", "float32,binary,int8"]
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert retrieval.run(parser.parse_args(argv), settings) == 0
    first = json.loads(capsys.readouterr().out)
    sqlite = first["sqlite"]
    assert sqlite["reused_store"] is False and sqlite["disk_mb"] > 0 and sqlite["writes_per_s"] > 0
    for kind in ("bm25", "dense", "hybrid"):
        for setting in ("unscoped", "scoped"):
            assert sqlite["warm"][f"{kind}_{setting}"]["n"] == 5
    assert sqlite["warm"]["memory"]["store_mb"] >= 0 and sqlite["scoped_only"]["reopen_first_answer_s"] > 0
    int8 = sqlite["warm_int8"]
    assert int8["vector_format"] == "int8" and int8["hybrid_unscoped"]["n"] == 5
    assert int8["dense_top20_overlap"] == {"unscoped": 1.0, "scoped": 1.0}  # rescored: the exact top 20
    binary = sqlite["warm_binary"]  # the store's default, which the targets and the one-scope child are read on
    assert binary["dense_top20_overlap"]["scoped"] == 1.0  # 100 chunks, fewer than it rescores: exact
    assert sqlite["scoped_only"]["vector_format"] == "binary" and "rss_mb<=1500" in first["targets"]
    assert sqlite["scoped_chunks"] == 100  # every 20th document is in the first scope: of six, the first

    assert retrieval.run(parser.parse_args(argv), settings) == 0
    again = json.loads(capsys.readouterr().out)["sqlite"]
    assert again["reused_store"] is True and again["disk_mb"] == sqlite["disk_mb"]
