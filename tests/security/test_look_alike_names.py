"""Defect 6 of the second security review: look-alike file names (a zero-width space, a Cyrillic "о") slipped
past the "name (2).pdf" rule and showed as ``handbook.pdf`` beside HR's file.

Now names are NFKC-normalised with format characters dropped, a name that only looks like someone else's file is
indexed as ``… (2).pdf`` like a same name, ``docs`` shows who uploaded each of two names that read alike, and
neither can replace or ``forget`` HR's file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core import ChatContext, ChatCore
from bot.texts import docs_text, ingest_result_text
from connectors.settings import Settings
from pipelines.file_names import clean_name, is_look_alike, name_key
from tests.security.conftest import make_pdf

SCOPE = "slack:T1:CHR"
HR = ChatContext("slack", SCOPE, "UHR")
MALLORY = ChatContext("slack", SCOPE, "UMALLORY")


def _policy(days: str) -> bytes:
    return make_pdf([("4.2 Parental leave", f"Parental leave is {days} at full pay.")])


@pytest.mark.parametrize(
    ("name", "looks_like"),
    [
        ("hand\u200bbook.pdf", "handbook.pdf"),  # zero-width space: dropped, the same name
        ("handbook\u2060.pdf", "handbook.pdf"),  # word joiner
        ("ｈａｎｄｂｏｏｋ.pdf", "handbook.pdf"),  # full-width letters: NFKC
        ("\u202efdp.koobdnah", "fdp.koobdnah"),  # a right-to-left override is no part of a name
    ],
)
def test_invisible_and_compatibility_characters_are_not_part_of_a_name(name: str, looks_like: str) -> None:
    assert clean_name(name) == looks_like


def test_a_cyrillic_or_greek_look_alike_has_the_same_key_but_not_the_same_name() -> None:
    for fake in ("hаndbook.pdf", "handbоok.pdf", "ΗANDBOOK.pdf"):  # Cyrillic а, Cyrillic о, Greek Η
        assert name_key(fake) == name_key("handbook.pdf") and is_look_alike(fake, "handbook.pdf")
    assert name_key("résumé.pdf") != name_key("resume.pdf")  # accents are letters of their own, not look-alikes


@pytest.mark.slow
def test_a_look_alike_upload_is_marked_like_a_same_name_and_cannot_touch_hrs_file(tmp_path: Path) -> None:
    core = ChatCore.from_settings(Settings(data_dir=tmp_path / "data", ocr_enabled=False))
    hr = core.upload(HR, file_name="handbook.pdf", data=_policy("sixteen weeks"))
    assert hr.file == "handbook.pdf"

    for i, fake in enumerate(["hand\u200bbook.pdf", "hаndbook.pdf"]):  # zero-width space; Cyrillic а
        result = core.upload(MALLORY, file_name=fake, data=_policy(f"{i + 2} days"))
        assert result.status == "indexed" and result.replaced_doc_id is None
        assert result.file.endswith(" (2).pdf"), result.file  # marked, whatever it imitates
        assert f"because {clean_name(fake)} was uploaded by someone else" in ingest_result_text(result)

    listed = {d.file: d.uploaded_by for d in core.documents([SCOPE])}
    assert listed == {"handbook.pdf": "UHR", "handbook (2).pdf": "UMALLORY", "hаndbook (2).pdf": "UMALLORY"}
    shown = docs_text(core.documents([SCOPE]))
    assert "handbook.pdf — 1 pages" in shown and "uploaded by UHR" in shown and "uploaded by UMALLORY" in shown
    assert "sixteen weeks" in " ".join(d.content or "" for d in core.service.store.fetch(scopes=[SCOPE], limit=99))

    # forget by the look-alike name cannot reach HR's file; by HR's name Mallory is refused
    assert core.forget(MALLORY, "handbook.pdf", is_admin=False).status == "not_allowed"
    assert core.forget(MALLORY, "hand\u200bbook.pdf", is_admin=False).status == "not_allowed"
    assert "handbook.pdf" in {d.file for d in core.documents([SCOPE])}
