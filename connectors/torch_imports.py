"""Keep torch out of a process that does not need it.

Haystack imports torch eagerly when it is installed, only for its device helpers, which Citebot does not use; that
import is most of a cold start. :func:`defer_torch_imports` makes it fail softly (Haystack expects that) until
something that really needs torch (the torch embedding backend, the ONNX export) imports it.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any

_lock = threading.Lock()
_HEAVY = ("torch", "transformers", "sentence_transformers")
_IMPORT_MACHINERY = ("importlib", "_frozen_importlib")


class _DeferTorch(importlib.abc.MetaPathFinder):
    """Fails ``import torch`` (and transformers) *when Haystack itself asks*, as if torch were not installed.

    Haystack wraps those imports in ``LazyImport`` (which, despite its name, imports at once and only defers
    an ImportError), for device helpers and Hugging Face components Citebot does not use. Any other importer
    (sentence-transformers, a test, the torch embedding backend) gets torch as usual.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.split(".")[0] not in _HEAVY:
            return
        frame = sys._getframe(1)
        while frame is not None:
            name = str(frame.f_globals.get("__name__", ""))
            if not name.startswith(_IMPORT_MACHINERY):
                if name == "haystack" or name.startswith("haystack."):
                    raise ModuleNotFoundError(f"No module named {fullname!r} (deferred by Citebot)", name=fullname)
                return
            frame = frame.f_back  # type: ignore[assignment]
        return


def defer_torch_imports() -> None:
    """Keep Haystack's eager optional ``import torch`` out of this process (idempotent). Call before the first
    Haystack import; the command line does."""
    with _lock:
        if not any(isinstance(f, _DeferTorch) for f in sys.meta_path):
            sys.meta_path.insert(0, _DeferTorch())


def heavy_modules_loaded() -> list[str]:
    """Which of torch / transformers / sentence-transformers this process has imported (for tests and benches)."""
    return [m for m in _HEAVY if m in sys.modules]
