"""``citebot models prepare``: make the embedding model's ONNX export now (set-up) instead of on first start."""

from __future__ import annotations

import argparse
import time
from typing import Any

from connectors.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser("models", help="the embedding model: prepare its ONNX export")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    prep = actions.add_parser(
        "prepare", help="export the model to ONNX into the machine's model cache (once per machine; set-up runs it)"
    )
    prep.add_argument("--backend", choices=["onnx", "onnx-int8", "torch"], default=None,
                      help="default: CITEBOT_EMBEDDING_BACKEND")
    prep.set_defaults(func=run_prepare)


def run_prepare(args: argparse.Namespace, settings: Settings) -> int:
    from connectors.embedding import get_encoder

    backend = args.backend or settings.embedding_backend
    t0 = time.perf_counter()
    enc = get_encoder(settings.resolved_model_path, settings.torch_threads, backend=backend,
                      models_dir=settings.resolved_models_dir, dim=settings.embedding_dim)
    took = time.perf_counter() - t0
    where = f" in {settings.resolved_models_dir}" if enc.backend != "torch" else ""
    fallback = f" (fell back from {backend}: see the log)" if enc.backend != backend else ""
    print(f"Embedding backend {enc.backend}{fallback}, fingerprint {enc.fingerprint}{where}; ready in {took:.1f} s.")
    return 0
