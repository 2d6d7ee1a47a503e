"""Defect 8 of the security review: uploading a file of the same name never replaces another person's document.

Before the fix both stores replaced by (scope, file name) whoever had uploaded the older version, which got
around ``forget``'s uploader-or-admin rule: anyone could swap a colleague's ``expenses.pdf`` for their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.core import ChatContext, ChatCore
from bot.texts import ingest_result_text
from connectors.settings import Settings
from tests.helpers.pdfs import sections_pdf
from tests.helpers.stores import chunk

SCOPE = "slack:T1:CFIN"
ALICE = ChatContext("slack", SCOPE, "UALICE")
BOB = ChatContext("slack", SCOPE, "UBOB")
CAROL = ChatContext("slack", SCOPE, "UCAROL")  # a workspace admin


def _expenses(limit: str) -> bytes:
    return sections_pdf([("3 Travel", f"Hotel costs are reimbursed up to {limit} per night with an itemised receipt.")])


def _contents(core: ChatCore) -> str:
    return " ".join(d.content or "" for d in core.service.store.fetch(scopes=[SCOPE], limit=100))


@pytest.mark.slow
def test_a_same_name_upload_by_someone_else_is_indexed_beside_it(tmp_path: Path) -> None:
    core = ChatCore.from_settings(Settings(data_dir=tmp_path / "data", ocr_enabled=False))
    alices = core.upload(ALICE, file_name="expenses.pdf", data=_expenses("120 pounds"))

    bobs = core.upload(BOB, file_name="expenses.pdf", data=_expenses("900 pounds"))
    assert (bobs.status, bobs.file, bobs.replaced_doc_id) == ("indexed", "expenses (2).pdf", None)
    assert "indexed as expenses (2).pdf because expenses.pdf was uploaded by someone else" in ingest_result_text(bobs)
    listed = [(d.file, d.uploaded_by) for d in core.documents([SCOPE])]
    assert listed == [("expenses (2).pdf", "UBOB"), ("expenses.pdf", "UALICE")]
    assert "120 pounds" in _contents(core) and "900 pounds" in _contents(core)

    # Bob's next version replaces his own copy, not Alice's, and takes no third name
    again = core.upload(BOB, file_name="expenses.pdf", data=_expenses("950 pounds"))
    assert (again.file, again.replaced_doc_id) == ("expenses (2).pdf", bobs.doc_id)
    assert "900 pounds" not in _contents(core) and "120 pounds" in _contents(core)

    # Alice's own new version replaces hers, as before
    alices2 = core.upload(ALICE, file_name="expenses.pdf", data=_expenses("130 pounds"))
    assert (alices2.file, alices2.replaced_doc_id) == ("expenses.pdf", alices.doc_id)

    # an admin may replace anyone's version (as forget allows an admin to remove it)
    carols = core.upload(CAROL, file_name="expenses.pdf", data=_expenses("140 pounds"), is_admin=lambda: True)
    assert (carols.file, carols.replaced_doc_id) == ("expenses.pdf", alices2.doc_id)
    assert "It replaces the earlier version." in ingest_result_text(carols)
    listed = [(d.file, d.uploaded_by) for d in core.documents([SCOPE])]
    assert listed == [("expenses (2).pdf", "UBOB"), ("expenses.pdf", "UCAROL")]


def _version(doc_id: str, uploader: str, word: str) -> list[Any]:
    return [
        chunk(doc_id, i, f"{word} clause {i}", scope=SCOPE, file="expenses.pdf", uploaded_by=uploader)
        for i in range(2)
    ]


def test_the_store_replaces_only_what_the_service_named(any_store: Any) -> None:
    """The store-level half, in both stores: the service decides who may replace what (above); a write removes
    exactly the versions it names, never another of the same file name."""
    assert any_store.replace_document(_version("a1", "UALICE", "alpha"), scope=SCOPE) == []
    assert any_store.replace_document(_version("b1", "UBOB", "bravo"), scope=SCOPE) == []
    assert [(d.doc_id, d.uploaded_by) for d in any_store.list_documents(scopes=[SCOPE])] == [
        ("a1", "UALICE"),
        ("b1", "UBOB"),
    ]
    assert {d.meta["doc_id"] for d in any_store.bm25_search("alpha", scopes=[SCOPE], top_k=5)} == {"a1"}

    assert any_store.replace_document(_version("a2", "UALICE", "omega"), scope=SCOPE, replaces=["a1"]) == [
        "a1"
    ]
    assert sorted(d.doc_id for d in any_store.list_documents(scopes=[SCOPE])) == ["a2", "b1"]
