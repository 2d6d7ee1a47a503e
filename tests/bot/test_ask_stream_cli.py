"""`citebot ask` on a terminal in LLM mode prints the answer's checked sentences as the model writes them, then the
quotes; piped, it prints the same answer whole, once (issue 24 item 8)."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from eval.fakes.openai_api import FakeOpenAI, passages_in
from tests.helpers.pdfs import sections_pdf

pytestmark = pytest.mark.slow

LEAVE = "The primary carer receives 26 weeks of parental leave on full pay."
NOTICE = "Employees give four weeks of notice before parental leave starts."
QUESTION = "How many weeks of parental leave does the primary carer get?"


def _model(req: dict[str, Any]) -> str:
    chunk = next(cid for cid, text in passages_in(req) if LEAVE in " ".join(text.split()))
    cits = [{"n": 1, "chunk_id": chunk, "quote": LEAVE}, {"n": 2, "chunk_id": chunk, "quote": NOTICE}]
    return json.dumps({"answerable": True, "citations": cits,
                       "answer": "Carers get 26 weeks on full pay [1]. Notice is four weeks [2]."})


class _Terminal(io.StringIO):
    """stdout as a terminal; each write noted with how many model streams had ended by then."""

    def __init__(self, fake: FakeOpenAI) -> None:
        super().__init__()
        self.fake = fake
        self.writes: list[tuple[str, int]] = []
        self.first = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if s:
            self.writes.append((s, self.fake.streams_ended))
            self.first.set()
        return super().write(s)


def test_ask_prints_sentences_as_they_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pdf = tmp_path / "handbook.pdf"
    pdf.write_bytes(sections_pdf([("4.2 Parental leave", f"{LEAVE} {NOTICE}")]))
    monkeypatch.setenv("CITEBOT_OCR_ENABLED", "false")
    assert main(["ingest", str(pdf)]) == 0
    capsys.readouterr()
    with FakeOpenAI(_model) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        assert main(["ask", QUESTION]) == 0  # piped: the whole answer, once
        piped = capsys.readouterr().out
        terminal = _Terminal(fake)
        monkeypatch.setattr("sys.stdout", terminal)
        gate = fake.hold_stream("Notice is")
        done: dict[str, int] = {}
        worker = threading.Thread(target=lambda: done.update(rc=main(["ask", QUESTION])))
        worker.start()
        try:
            assert terminal.first.wait(120)
            assert terminal.writes == [("Carers get 26 weeks on full pay [1].", 0)]  # the model is still writing
        finally:
            gate.set()
            worker.join(120)
    assert done["rc"] == 0
    assert terminal.getvalue() == piped  # the same lines in the end
    assert piped.startswith("Carers get 26 weeks on full pay [1]. Notice is four weeks [2].\n")
    assert f"[1] │ {LEAVE}" in piped
