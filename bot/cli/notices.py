"""Short notices for a person at a terminal, on stderr: what a one-shot command is about to spend time on (the log,
which would say so too, shows warnings only unless ``-v``)."""

from __future__ import annotations

import sys

from connectors.settings import Settings


def announce_model_export(settings: Settings) -> None:
    """Say so when this command will first export the embedding model to ONNX (once per model and machine, 10-30 s
    of silence otherwise)."""
    if settings.embedding_backend == "torch" or not sys.stderr.isatty():
        return
    from connectors.embedding import onnx_available, onnx_file

    path = settings.resolved_model_path
    if not path.is_dir() or not onnx_available():
        return
    target = onnx_file(settings.resolved_models_dir, path, settings.embedding_dim, settings.embedding_backend)
    if not target.exists():
        print(f"Preparing the embedding model for this machine (once; 10-30 s) in {target.parent} …",
              file=sys.stderr, flush=True)


def ocr_language_problem(settings: Settings) -> str:
    """"" unless OCR is on and Tesseract lacks a language of ``CITEBOT_OCR_LANGUAGE`` (then one line naming it):
    checked where uploads start being indexed, so a wrong code stops the command instead of leaving every scanned
    page unreadable."""
    if not settings.ocr_enabled:
        return ""
    from connectors.ocr import language_problem

    return language_problem(settings.ocr_language)
