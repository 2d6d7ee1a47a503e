"""Tesseract OCR through pytesseract: one page image in, lines with boxes and confidence out.

Tesseract runs single-threaded (``OMP_THREAD_LIMIT=1``, 3.5x faster on these machines than its
default threading) with a per-call timeout; a timeout or a Tesseract error raises :class:`OcrError`
so the caller can skip that page and report it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any


class OcrError(Exception):
    """OCR of one image failed or timed out."""


class OcrUnavailableError(OcrError):
    """The tesseract binary is not installed."""


@dataclass(frozen=True)
class OcrLine:
    text: str
    x0: float  # pixels, top-left origin
    top: float
    x1: float
    bottom: float
    confidence: float  # mean word confidence 0-100


@dataclass(frozen=True)
class OcrPage:
    lines: list[OcrLine]
    confidence: float  # mean word confidence over the page (0 when no words)


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def installed_languages() -> list[str] | None:
    """The languages Tesseract can read (``tesseract --list-langs``, less ``osd``, which detects orientation only);
    None when Tesseract is not installed or cannot say."""
    if not tesseract_available():
        return None
    import pytesseract

    try:
        found = pytesseract.get_languages(config="")
    except (pytesseract.TesseractError, OSError, RuntimeError):
        return None
    return sorted(lang for lang in found if lang != "osd")


def language_problem(language: str) -> str:
    """"" when Tesseract can read every language of ``language`` (``eng+deu``) or cannot be asked (not installed:
    each scanned page says so when it is met), else one line naming ``CITEBOT_OCR_LANGUAGE``, what is missing and
    what is installed."""
    installed = installed_languages()
    if installed is None:
        return ""
    missing = [lang for lang in language.split("+") if lang not in installed]
    if not missing:
        return ""
    return (
        f"CITEBOT_OCR_LANGUAGE={language}: Tesseract has no {' or '.join(missing)} installed (installed: "
        f"{', '.join(installed) or 'none'}); use those codes, or install a language's pack (Debian: "
        "apt-get install tesseract-ocr-deu for deu; tesseract --list-langs shows them)"
    )


# Tesseract page segmentation modes: 3 = a page of columns and paragraphs (documents), 11 = as much text as
# possible in no particular layout (slides: titles, bullets, chart labels)
PAGE_SEGMENTATION_MODES = (3, 4, 6, 11, 12)


def ocr_image(image: Any, *, language: str = "eng", timeout_s: float = 60.0, psm: int = 3) -> OcrPage:
    """OCR a PIL image with page segmentation mode ``psm``; words grouped into Tesseract's lines."""
    import pytesseract

    if psm not in PAGE_SEGMENTATION_MODES:
        raise ValueError(f"psm must be one of {PAGE_SEGMENTATION_MODES}")
    if not tesseract_available():
        raise OcrUnavailableError("tesseract is not installed (apt-get install tesseract-ocr)")
    # pytesseract passes os.environ to the subprocess; one OpenMP thread is much faster here.
    os.environ["OMP_THREAD_LIMIT"] = "1"
    try:
        data = pytesseract.image_to_data(
            image, lang=language, config=f"--psm {psm}", timeout=max(1, int(timeout_s)),
            output_type=pytesseract.Output.DICT,
        )
    except RuntimeError as e:  # pytesseract raises RuntimeError('Tesseract process timeout')
        raise OcrError("OCR timed out") from e
    except pytesseract.TesseractError as e:
        raise OcrError(f"tesseract failed (status {e.status})") from e
    lines: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if not str(word).strip():
            continue
        try:
            conf = float(data["conf"][i])
        except (TypeError, ValueError):
            conf = -1.0
        if conf < 0:
            continue
        key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
        lines.setdefault(key, []).append(i)
    out: list[OcrLine] = []
    confs: list[float] = []
    for idxs in lines.values():
        words = [str(data["text"][i]).strip() for i in idxs]
        wc = [float(data["conf"][i]) for i in idxs]
        confs.extend(wc)
        out.append(OcrLine(
            text=" ".join(words),
            x0=float(min(data["left"][i] for i in idxs)),
            top=float(min(data["top"][i] for i in idxs)),
            x1=float(max(data["left"][i] + data["width"][i] for i in idxs)),
            bottom=float(max(data["top"][i] + data["height"][i] for i in idxs)),
            confidence=sum(wc) / len(wc),
        ))
    return OcrPage(lines=out, confidence=(sum(confs) / len(confs)) if confs else 0.0)
