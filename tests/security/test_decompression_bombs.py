"""Security issue 10, defect 4: decompression bombs are refused, and no PDF can take the indexer down.

Every stream is decoded through its real filter chain (``/DecodeParms`` and filter arrays included) under one
budget per document, and a content stream that pages list again counts again. What gets past that meets the
memory limit of the child process that parses. Each refusal tells the user the PDF is "too large when
decompressed" and leaves the store as it was: an earlier upload under the same name survives. A crash of that
child through our own fault is not blamed on the file. The budgets are tiny here (4 MB a stream, 8 MB a
document), so the bombs are a few kilobytes.
"""

from __future__ import annotations

import base64
import binascii
import io
import zlib
from pathlib import Path

import pytest

from connectors.settings import Settings
from connectors.stores import open_store
from pipelines.indexing import FAILED_INTERNAL, Indexer
from pipelines.reading import isolation
from pipelines.reading.guard import ascii85_decode, ascii_hex_decode, check_inflation
from pipelines.reading.layout import IngestError
from tests.helpers import isolation_targets
from tests.helpers.pdfs import sections_pdf

REFUSAL = "too large when decompressed"
_MB = 1024 * 1024
_BUDGETS = {"max_stream_mb": 4, "max_decoded_mb": 8}


def _deflated(data_mb: float, fill: bytes = b" ", head: bytes = b"", level: int = 9) -> bytes:
    """``head`` then spaces (whitespace to a content-stream parser) up to ``data_mb`` MB, deflated."""
    comp = zlib.compressobj(level)
    size = int(data_mb * _MB) - len(head)
    block = fill * _MB
    out = [comp.compress(head)]
    while size > 0:
        out.append(comp.compress(block[:size]))
        size -= _MB
    return b"".join(out) + comp.flush()


def _pdf(pages_contents: list[bytes], stream_dict: bytes, stream: bytes, *, xref_entry: bytes | None = None) -> bytes:
    """A PDF whose object 3 is ``stream`` (with ``stream_dict`` entries), one page per ``/Contents`` value, and a
    Helvetica font. ``xref_entry`` replaces object 3's line in the cross-reference table."""
    n_pages = len(pages_contents)
    font = 4 + n_pages
    kids = b" ".join(b"%d 0 R" % (4 + i) for i in range(n_pages))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n_pages),
        b"<< /Length %d %s >>\nstream\n" % (len(stream), stream_dict) + stream + b"\nendstream",
        *(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %s "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (c, font)
            for c in pages_contents
        ),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    lines = [b"%010d 00000 n \n" % o for o in offsets]
    if xref_entry is not None:
        lines[2] = xref_entry
    out.write(b"".join(lines))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return out.getvalue()


@pytest.fixture
def indexer(tmp_path: Path) -> Indexer:
    """An indexer with tiny decoding budgets, holding a first ``x.pdf`` that a refused upload must not replace."""
    settings = Settings(data_dir=tmp_path / "data", **_BUDGETS)  # type: ignore[arg-type]
    ix = Indexer(settings, open_store(settings))
    first = sections_pdf([("Scope", "The supplier delivers the goods described in annex A within ten days.")])
    res = ix.ingest(first, file_name="x.pdf", scope="local", uploaded_by="U1")
    assert res.status == "indexed", res.error  # ReportLab writes [/ASCII85Decode /FlateDecode]: it passes
    return ix


def _documents(ix: Indexer) -> list:
    return ix.store.list_documents(scopes=["local"])


def _assert_refused_and_store_unchanged(ix: Indexer, data: bytes) -> None:
    before = _documents(ix)
    count = ix.store.count_documents()
    res = ix.ingest(data, file_name="x.pdf", scope="local", uploaded_by="U1")
    assert res.status == "failed", res
    assert res.error and REFUSAL in res.error, res.error
    assert _documents(ix) == before and len(before) == 1
    assert ix.store.count_documents() == count


def test_a_flate_bomb_with_decode_parms_is_refused_and_the_store_is_unchanged(indexer: Indexer) -> None:
    """The old check looked for ``/FlateDecode >> stream`` and missed a ``/DecodeParms`` dictionary after it."""
    parms = b"/Filter /FlateDecode /DecodeParms << /Predictor 12 /Colors 1 /BitsPerComponent 8 /Columns 4 >>"
    data = _pdf([b"3 0 R"], parms, _deflated(20, fill=b"\0"))
    assert len(data) < 40_000
    _assert_refused_and_store_unchanged(indexer, data)


@pytest.mark.parametrize(
    ("filters", "encode"),
    [
        pytest.param(b"[/ASCIIHexDecode /FlateDecode]", lambda z: binascii.hexlify(z) + b">", id="hex-then-flate"),
        pytest.param(b"[/A85 /Fl]", lambda z: base64.a85encode(z, wrapcol=72) + b"~>", id="ascii85-then-flate"),
    ],
)
def test_a_filter_chain_bomb_is_refused_and_the_store_is_unchanged(
    indexer: Indexer, filters: bytes, encode: object
) -> None:
    """The old check fed the hex (or ASCII85) text to zlib, which failed, and skipped the stream."""
    data = _pdf([b"3 0 R"], b"/Filter " + filters, encode(_deflated(20)))  # type: ignore[operator]
    _assert_refused_and_store_unchanged(indexer, data)


def test_a_run_length_bomb_inside_flate_is_refused(indexer: Indexer) -> None:
    """Each stage of the chain is decoded and counted: 160 kB of run-length codes expand 64 times."""
    run_length = b"\x81 " * (20 * _MB // 128) + b"\x80"  # 128 spaces per two bytes, then end of data
    data = _pdf([b"3 0 R"], b"/Filter [/FlateDecode /RunLengthDecode]", zlib.compress(run_length, 9))
    _assert_refused_and_store_unchanged(indexer, data)


_SHARED = b"BT /F1 12 Tf 72 700 Td (A shared page) Tj ET\n"


@pytest.mark.parametrize(
    ("pages_contents", "refused"),
    [
        pytest.param([b"3 0 R"] * 2, False, id="two-pages-list-it-and-fit"),
        pytest.param([b"3 0 R"] * 4, True, id="four-pages-list-it"),
        pytest.param([b"[3 0 R 3 0 R 3 0 R 3 0 R]"], True, id="one-page-lists-it-four-times"),
    ],
)
def test_a_stream_that_pages_list_again_counts_again(
    indexer: Indexer, pages_contents: list[bytes], refused: bool
) -> None:
    """A 3 MB content stream fits the 4 MB a stream may decode to; listed four times it is 12 MB of the 8 MB a
    document may decode to (and 12 MB of content on one page). Listed twice (6 MB) it is indexed."""
    data = _pdf(pages_contents, b"/Filter /FlateDecode", _deflated(3, head=_SHARED))
    assert len(data) < 20_000
    if refused:
        _assert_refused_and_store_unchanged(indexer, data)
    else:
        res = indexer.ingest(data, file_name="shared.pdf", scope="local")
        assert res.status == "indexed" and res.pages == 2, res.error


_BOMB = _deflated(6)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB, xref_entry=b"0000000000 65535 f \n"),
                     id="left-out-of-the-xref-table"),
        pytest.param(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB, xref_entry=b"0000000005 00000 n \n"),
                     id="xref-offset-points-elsewhere"),
        pytest.param(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB).replace(b"/Length %d" % len(_BOMB),
                                                                              b"/Length 99999999"),
                     id="declared-length-too-long"),
        pytest.param(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB).replace(b"/Length %d" % len(_BOMB),
                                                                              b"/Length 10"),
                     id="declared-length-too-short"),
        pytest.param(_pdf([b"3 0 R"], b"/Filter [/Crypt /FlateDecode] /DecodeParms [<< /Name /Identity >> null]",
                          _BOMB), id="identity-crypt-filter-first"),
        pytest.param(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB).replace(b"stream\n", b"stream junk\n", 1),
                     id="junk-after-the-stream-keyword"),
        pytest.param(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB).replace(b"stream\n", b"stream junk\r\n", 1),
                     id="junk-and-crlf-after-the-stream-keyword"),
        pytest.param(_pdf([b"3 0 R"], b"/Note (a string: >> stream\n) /Filter /Fl", _BOMB),
                     id="stream-keyword-inside-a-string"),
    ],
)
def test_a_bomb_is_found_wherever_a_reader_would_find_it(data: bytes) -> None:
    """pdfium rebuilds a broken cross-reference table by scanning the file and finds the end of a stream whose
    /Length is wrong by searching for ``endstream``, so the check looks the same way."""
    with pytest.raises(IngestError) as err:
        check_inflation(data, max_stream_mb=4, max_total_mb=8)
    assert REFUSAL in err.value.reason and err.value.code == "bomb"


def test_an_encrypted_bomb_that_opens_without_a_password_is_decrypted_and_refused() -> None:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(_pdf([b"3 0 R"], b"/Filter /FlateDecode", _BOMB))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(IngestError) as err:
        check_inflation(out.getvalue(), max_stream_mb=4, max_total_mb=8)
    assert REFUSAL in err.value.reason


@pytest.mark.parametrize("size", [0, 1, 4, 5, 7, 8191, 40_961, 300_001])
def test_the_guards_ascii_decoders_agree_with_the_standard_library(size: int) -> None:
    """The guard decodes ASCII85 and hex itself (fast, and leniently: up to the end marker or the first byte a
    reader would stop at); on valid input it must give what every reader gives."""
    import os

    raw = os.urandom(size) + bytes(size % 9)  # runs of zeros: ASCII85 writes them as "z"
    assert ascii85_decode(base64.a85encode(raw, wrapcol=72) + b"~>") == raw
    assert ascii85_decode(base64.a85encode(raw, foldspaces=False)) == raw
    assert ascii_hex_decode(binascii.hexlify(raw) + b">trailing") == raw


# --- the child process and its memory limit -------------------------------------------------------------------

_ORDINARY = sections_pdf([("Scope", "The supplier delivers the goods described in annex A within ten days.")])


def test_a_pdf_that_needs_more_memory_than_the_limit_is_refused_and_the_indexer_goes_on(tmp_path: Path) -> None:
    """100 MB of page content passes decoding budgets raised for the test, but pdfium needs twice that to parse the
    page: past CITEBOT_INGEST_MAX_MEMORY_MB (256 here) the child fails, not the indexer. The same limit leaves
    room for an ordinary PDF, before and after."""
    settings = Settings(data_dir=tmp_path / "data", ingest_max_memory_mb=256, max_stream_mb=128, max_decoded_mb=256)
    ix = Indexer(settings, open_store(settings))
    assert ix.ingest(_ORDINARY, file_name="x.pdf", scope="local").status == "indexed"
    heavy = _pdf([b"3 0 R"], b"/Filter /FlateDecode", _deflated(100, head=_SHARED, level=1))
    _assert_refused_and_store_unchanged(ix, heavy)
    res = ix.ingest(sections_pdf([("Term", "This agreement runs for two years.")]), file_name="y.pdf", scope="local")
    assert res.status == "indexed", res.error


def test_the_reading_childs_cpu_time_is_counted_in_the_process_that_ran_it() -> None:
    """The fork server reaps the children, so the process's own ``RUSAGE_CHILDREN`` misses them: a benchmark that
    counted only that would call a reading free."""
    before = isolation.children_cpu_s()
    assert isolation.run_isolated(isolation_targets.busy, 0.4, max_memory_mb=512, deadline=None) > 0
    used = isolation.children_cpu_s() - before
    assert 0.4 <= used < 3.0


@pytest.mark.parametrize(
    ("target", "args", "code"),
    [
        pytest.param(isolation_targets.allocate, (1024,), "memory", id="memory-error"),
        pytest.param(isolation_targets.native_abort, (), "memory", id="native-abort-on-failed-allocation"),
    ],
)
def test_a_child_out_of_memory_is_too_large_when_decompressed(target: object, args: tuple, code: str) -> None:
    with pytest.raises(IngestError) as err:
        isolation.run_isolated(target, *args, max_memory_mb=256, deadline=None)  # type: ignore[arg-type]
    assert REFUSAL in err.value.reason and err.value.code == code


@pytest.mark.parametrize(
    ("target", "error"),
    [
        pytest.param(isolation_targets.our_bug, "KeyError", id="exception-in-our-code"),
        pytest.param(isolation_targets.native_crash, "SIGSEGV", id="segmentation-fault"),
    ],
)
def test_a_child_crash_that_is_our_bug_is_reported_as_ours_not_as_the_file(
    indexer: Indexer, monkeypatch: pytest.MonkeyPatch, target: object, error: str
) -> None:
    """The reader's child fails through our fault: the user hears it is our error (logged), not that the file is
    bad; the log has the type and place, never the message (which carried document text)."""
    import json

    from structlog.testing import capture_logs

    import pipelines.components.isolated_reader as reader_module

    def crashing_reader(data: bytes, options: object, *, max_memory_mb: int, deadline: float | None,
                        **_callbacks: object) -> object:
        return isolation.run_isolated(target, max_memory_mb=max_memory_mb, deadline=deadline)  # type: ignore[arg-type]

    monkeypatch.setattr(reader_module, "read_pdf_isolated", crashing_reader)
    before = _documents(indexer)
    with capture_logs() as logs:
        res = indexer.ingest(_ORDINARY + b"\n", file_name="x.pdf", scope="local", uploaded_by="U1")
    assert res.status == "failed" and res.error == FAILED_INTERNAL
    assert REFUSAL not in res.error and "damaged" not in res.error
    assert _documents(indexer) == before
    event = next(e for e in logs if e["event"] == "ingest_internal_error")
    assert event["error"] == error and event["process"] == "reader"
    if error == "KeyError":
        assert event["raised_in"].startswith("tests/helpers/isolation_targets.py:")
        assert event["raised_in"].endswith(" in our_bug")
    assert "Okafor" not in json.dumps(logs, default=str)


def test_a_child_past_the_deadline_is_killed_with_its_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stuck in native code, the child never checks the deadline: it is killed a grace period past it, and the
    process it started (Tesseract, in real life) with it."""
    import time

    monkeypatch.setattr(isolation, "GRACE_S", 0.5)
    helpers: list[int] = []
    started = time.monotonic()
    with pytest.raises(IngestError) as err:
        isolation.run_isolated(
            isolation_targets.hang_with_a_helper, max_memory_mb=256, deadline=time.monotonic() + 1.0,
            on_progress=lambda _what, pid: helpers.append(pid),
        )
    assert err.value.code == "timeout" and "longer than the time allowed" in err.value.reason
    assert time.monotonic() - started < 45  # long before the target's own 60 s sleep would have ended
    assert helpers

    def gone(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] == "Z"  # killed, not yet reaped by init
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 5
    while not gone(helpers[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(helpers[0])


def test_progress_and_the_result_come_back_from_the_child() -> None:
    seen: list[tuple] = []
    assert isolation.run_isolated(
        isolation_targets.echo, {"pages": 3}, max_memory_mb=512, deadline=None, on_progress=lambda *v: seen.append(v)
    ) == {"pages": 3}
    assert seen == [("parsing", 1, 1)]


def test_a_limit_below_what_the_child_needs_to_start_is_a_configuration_error() -> None:
    """Not "too large" for every upload: the log names the setting (see pipelines/indexing.py)."""
    with pytest.raises(isolation.MemoryLimitTooLowError) as err:
        isolation.run_isolated(isolation_targets.echo, 1, max_memory_mb=32, deadline=None)
    assert err.value.limit_mb == 32 and err.value.mapped_mb > 0


def test_the_fork_server_preloads_our_reading_code_only_when_it_would_import_this_very_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Python 3.11's fork server resolves modules from its working directory, not from our sys.path: from anywhere
    else it could load another checkout's reading code into every child."""
    monkeypatch.chdir(Path(isolation.__file__).resolve().parents[2])
    assert "pipelines.reading.reader" in isolation._preload()
    monkeypatch.chdir(tmp_path)
    assert "pipelines.reading.reader" not in isolation._preload()
