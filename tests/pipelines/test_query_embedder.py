"""The question embedder: the shared packaged model, unit-normalised vectors."""

from __future__ import annotations

import math

import pytest

from connectors.settings import Settings
from pipelines.components.query_embedder import QueryEmbedder


class TestQueryEmbedder:
    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"model_path": ""}, "model_path"),
            ({"model_path": "/m", "threads": 0}, "threads"),
            ({"model_path": "/m", "backend": "tensorflow"}, "backend"),
            ({"model_path": "/m", "backend": "onnx"}, "models_dir"),
            ({"model_path": "/m", "batch_window_ms": -1.0}, "batch_window_ms"),
        ],
    )
    def test_init_validates(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            QueryEmbedder(**kwargs)

    def test_to_dict(self):
        e = QueryEmbedder(model_path="/m", threads=2, backend="onnx", models_dir="/d/models", batch_window_ms=4.0)
        assert e.to_dict() == {
            "type": "pipelines.components.query_embedder.QueryEmbedder",
            "init_parameters": {"model_path": "/m", "threads": 2, "backend": "onnx", "models_dir": "/d/models",
                                "batch_window_ms": 4.0},
        }

    def test_from_dict(self):
        e = QueryEmbedder.from_dict(QueryEmbedder(model_path="/m", backend="onnx-int8", models_dir="/d").to_dict())
        got = (e.model_path, e.threads, e.backend, e.models_dir, e.batch_window_ms)
        assert got == ("/m", 1, "onnx-int8", "/d", 0.0)

    @pytest.mark.slow
    def test_run(self):
        e = QueryEmbedder(model_path=str(Settings().resolved_model_path))
        e.warm_up()
        e.warm_up()  # safe twice
        a = e.run(text="How long is parental leave?")["embedding"]
        b = e.run(text="How many weeks of leave do new parents get?")["embedding"]
        c = e.run(text="Which law governs the contract?")["embedding"]
        assert len(a) == 384 and math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-4)
        dot = lambda u, v: sum(x * y for x, y in zip(u, v, strict=True))  # noqa: E731
        assert dot(a, b) > dot(a, c)
        with pytest.raises(ValueError, match="non-empty"):
            e.run(text="  ")

    @pytest.mark.slow
    def test_int8_workers_run_the_model_themselves_and_fp32_shares_batches(self, shared_models_dir):
        """int8 runs one text at a time, so a shared batch would only queue every worker's texts on one thread;
        fp32 computes a batch at once, so concurrent questions still share one."""
        from connectors.embedding import BatchingEncoder
        from pipelines.components.query_embedder import shared_encoder

        model = str(Settings().resolved_model_path)
        int8 = shared_encoder(model, 1, "onnx-int8", str(shared_models_dir), 4.0)
        assert int8.one_text_a_run and not isinstance(int8, BatchingEncoder)
        fp32 = shared_encoder(model, 1, "onnx", str(shared_models_dir), 4.0)
        assert isinstance(fp32, BatchingEncoder) and not fp32.one_text_a_run
        assert shared_encoder(model, 1, "onnx", str(shared_models_dir), 0.0) is fp32.encoder
