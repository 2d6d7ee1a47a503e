"""Defect 6 of the second security review: look-alike file names (a zero-width space, a Cyrillic "о") slipped
past the "name (2).pdf" rule and showed as ``handbook.pdf`` beside HR's file.

Now names are NFKC-normalised with format characters dropped, a name that only looks like someone else's file is
indexed as ``… (2).pdf`` like a same name, ``docs`` shows who uploaded each of two names that read alike, and
neither can replace or ``forget`` HR's file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.core import ChatContext, ChatCore
from bot.texts import docs_text, ingest_result_text
from connectors.settings import Settings
from pipelines.file_names import clean_name, is_look_alike, name_key
from tests.helpers.pdfs import sections_pdf

SCOPE = "slack:T1:CHR"
HR = ChatContext("slack", SCOPE, "UHR")
MALLORY = ChatContext("slack", SCOPE, "UMALLORY")


def _policy(days: str) -> bytes:
    return sections_pdf([("4.2 Parental leave", f"Parental leave is {days} at full pay.")])


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


@pytest.mark.slow
def test_on_the_command_line_a_look_alike_from_another_path_is_kept_beside_and_replaces_only_itself(
    tmp_path: Path,
) -> None:
    """The command line's rule (a path is a file's identity, ``same_source_only``) with look-alike names: a
    ``hаndbook.pdf`` (Cyrillic а) from another folder is indexed beside ``a/handbook.pdf`` as ``hаndbook (2).pdf``,
    never replacing it although the command line runs as an admin; the same path again replaces only its own copy."""
    service = ChatCore.from_settings(Settings(data_dir=tmp_path / "data", ocr_enabled=False)).service
    asked: list[str] = []

    def admin() -> bool:
        asked.append("admin?")
        return True

    def ingest(path: str, days: str) -> Any:
        return service.ingest(_policy(days), file_name=path.rsplit("/", 1)[-1], scope="local", is_admin=admin,
                              source_url=f"file://{path}", same_source_only=True)

    first = ingest("/a/handbook.pdf", "sixteen weeks")
    fake = ingest("/b/hаndbook.pdf", "two days")
    assert fake.status == "indexed" and fake.file == "hаndbook (2).pdf" and fake.renamed_from == "hаndbook.pdf"
    assert fake.replaced_doc_id is None
    again = ingest("/b/hаndbook.pdf", "three days")
    assert again.file == "hаndbook (2).pdf" and again.replaced_doc_id == fake.doc_id
    same = ingest("/a/handbook.pdf", "seventeen weeks")
    assert same.file == "handbook.pdf" and same.replaced_doc_id == first.doc_id
    assert sorted(d.file for d in service.list_documents("local")) == ["handbook.pdf", "hаndbook (2).pdf"]
    assert asked == []  # on the command line no one is asked to be an admin: a path never replaces another's file
