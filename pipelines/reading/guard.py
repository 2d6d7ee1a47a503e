"""Refuse what must not be parsed, before the parser sees it.

Checks, in order: empty file, not a PDF (magic bytes, whatever the extension), over the size limit,
truncated (no ``%%EOF`` near the end), a decompression bomb (every stream decoded through its own filter
chain, all of them under one budget per document), cannot be opened (corrupt), password-protected (the
empty password is tried first), over the page limit. Each refusal is a fixed sentence the user can act on.

The bomb check finds streams the way a lenient reader does, not only through the cross-reference table:
every ``N G obj`` in the file is looked at, so an object the table leaves out, points past, or defines twice
is decoded too (pdfium rebuilds a broken table by the same scan). Decoding is bounded at every step: Flate
is inflated with ``max_length`` a chunk at a time and never kept, the other decoders get what is left of the
budget as their own limit.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import zlib
from collections.abc import Iterator
from typing import Any

from connectors.uploads import (
    BYTES_PER_MB,
    MAX_DECODED_MB,
    MAX_FILE_MB,
    MAX_PAGES,
    MAX_STREAM_MB,
    looks_like_pdf,
    max_upload_bytes,
)
from pipelines.reading.layout import IngestError

_MB = 1024 * 1024  # the decompression budgets' unit; the file's size cap is in connectors.uploads
_CHUNK = 64 * 1024

TOO_LARGE = "The PDF is too large when decompressed (a possible decompression bomb), so it was not indexed."

# pypdf only reads structure here; its warnings about malformed files would carry names and offsets from the
# document into our logs
logging.getLogger("pypdf").setLevel(logging.ERROR)


def too_large(code: str = "bomb") -> IngestError:
    return IngestError(TOO_LARGE, code=code)


def check_pdf_bytes(
    data: bytes,
    *,
    max_file_mb: float,
    max_stream_mb: float,
    max_total_inflated_mb: float,
) -> None:
    """Raise :class:`IngestError` when ``data`` is not a PDF we are willing to open."""
    if not data:
        raise IngestError("The file is empty.", code="empty")
    if not looks_like_pdf(data):
        raise IngestError("This file is not a PDF (it does not start with the PDF signature).", code="not_pdf")
    if len(data) > max_upload_bytes(max_file_mb):
        raise IngestError(
            f"The file is {len(data) / BYTES_PER_MB:.1f} MB, over the {max_file_mb:g} MB limit.", code="too_large"
        )
    if b"%%EOF" not in data[-4096:]:
        raise IngestError("The PDF is truncated or damaged (its end is missing); please upload it again.",
                          code="truncated")
    check_inflation(data, max_stream_mb=max_stream_mb, max_total_mb=max_total_inflated_mb)


def check_inflation(data: bytes, *, max_stream_mb: float, max_total_mb: float) -> None:
    """Decode every stream through its own filter chain under one budget for the whole document.

    Every stage of every chain counts, per stream (at most ``max_stream_mb``) and for the document (at most
    ``max_total_mb``). A page's content streams are joined into one buffer by the renderer, so they must fit
    ``max_stream_mb`` together, and a stream that pages list again counts again.
    """
    from pypdf.errors import LimitReachedError

    budget = _Budget(max_stream_mb=max_stream_mb, max_total_mb=max_total_mb)
    try:
        reader = _open(data)
        sizes: dict[tuple[int, int], int] = {}
        for key, raw, filters, parms in _stream_objects(data, reader):
            size = budget.stream(raw, filters, parms)
            sizes[key] = max(size, sizes.get(key, 0))  # an object defined twice: the bigger one
        seen: set[tuple[int, int]] = set()
        for contents in _page_contents(reader):
            page_size = 0
            for key in contents:
                size = sizes.get(key, 0)
                page_size += size
                if key in seen:
                    budget.count(size)
                seen.add(key)
            if page_size > budget.per_stream:
                raise too_large()
    except LimitReachedError as e:  # pypdf's own limits, hit while it reads the structure (object streams...)
        raise too_large() from e


def _open(data: bytes) -> Any:
    """A pypdf reader for resolving references, decrypting and walking the pages; None when pypdf cannot
    read the file (the objects are still found by the scan; pdfium decides whether the file opens)."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    try:
        return PdfReader(io.BytesIO(data), strict=False)  # tries the empty password itself
    except (LimitReachedError, MemoryError):
        raise
    except Exception:  # noqa: BLE001 - whatever pypdf cannot read: the scan below works without it
        return None


_WS = b"\x00\t\n\x0c\r "
_OBJ_HEADER = re.compile(rb"(?<![0-9])([0-9]{1,10})[\x00\t\n\x0c\r ]+([0-9]{1,5})[\x00\t\n\x0c\r ]+obj")
_DICT_TOKEN = re.compile(rb"<<|>>|[<(%]")
_STRING_TOKEN = re.compile(rb"[()\\]")
_EOL = re.compile(rb"\r\n|[\r\n]")


def _skip_space(data: bytes, i: int) -> int:
    """Past whitespace and comments."""
    n = len(data)
    while i < n:
        if data[i] in _WS:
            i += 1
        elif data[i] == 0x25:  # %
            i = _line_end(data, i)
        else:
            break
    return i


def _line_end(data: bytes, i: int) -> int:
    m = _EOL.search(data, i)
    return m.end() if m else len(data)


def _data_start(data: bytes, i: int) -> int:
    """Where a stream's data starts, ``i`` being just past the ``stream`` keyword: after the end of line (spaces
    before it allowed), or after the next one when junk follows the keyword, as pdfium reads it."""
    while data[i:i + 1] == b" ":
        i += 1
    if data[i:i + 2] == b"\r\n":
        return i + 2
    if data[i:i + 1] in (b"\n", b"\r"):
        return i + 1
    return _line_end(data, i)


def _string_end(data: bytes, i: int) -> int:
    """Past the literal string whose ``(`` ends at ``i`` (nested parentheses, backslash escapes); -1 if open."""
    depth = 1
    while True:
        m = _STRING_TOKEN.search(data, i)
        if m is None:
            return -1
        i = m.end()
        tok = m.group()
        if tok == b"\\":
            i += 1
        elif tok == b"(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i


def _dict_end(data: bytes, i: int) -> int:
    """Past the dictionary starting with ``<<`` at ``i`` (strings, hex strings and comments skipped); -1 if open."""
    depth = 0
    while True:
        m = _DICT_TOKEN.search(data, i)
        if m is None:
            return -1
        i = m.end()
        tok = m.group()
        if tok == b"<<":
            depth += 1
        elif tok == b">>":
            depth -= 1
            if depth == 0:
                return i
        elif tok == b"<":  # a hex string
            j = data.find(b">", i)
            if j < 0:
                return -1
            i = j + 1
        elif tok == b"(":
            i = _string_end(data, i)
            if i < 0:
                return -1
        else:  # a comment
            i = _line_end(data, i)


def _resolve(value: Any) -> Any:
    try:
        return value.get_object() if value is not None else None
    except Exception:  # noqa: BLE001 - a reference that leads nowhere counts as absent
        return None


def _stream_objects(data: bytes, reader: Any) -> Iterator[tuple[tuple[int, int], memoryview, list[str], list[Any]]]:
    """(object key, raw bytes, filter names, decode parameters) of every stream object defined in the file.

    The data runs from the line after ``stream`` to where a reader may take it to end (:func:`_stream_ends`; when
    the two places differ, both are yielded and both count). Nothing is decoded here; encrypted data is decrypted
    (with the empty password pypdf tried) so that the filters see what a reader sees.
    """
    from pypdf.generic import ArrayObject, DictionaryObject, NameObject, StreamObject, read_object

    view = memoryview(data)
    starts = {m.start() for m in _OBJ_HEADER.finditer(data)}
    if reader is not None:
        # offsets from the cross-reference table too, in case one points where the scan did not look; without
        # them the scan alone still covers every well-formed object
        with contextlib.suppress(Exception):
            starts.update(off for entries in reader.xref.values() for off in entries.values() if isinstance(off, int))
    encryption = getattr(reader, "_encryption", None) if reader is not None else None
    for start in sorted(starts):
        m = _OBJ_HEADER.match(data, start)
        if m is None:
            continue
        i = _skip_space(data, m.end())
        if not data.startswith(b"<<", i):
            continue
        end = _dict_end(data, i)
        if end < 0:
            continue
        k = _skip_space(data, end)
        if not data.startswith(b"stream", k):
            continue
        body = _data_start(data, k + 6)
        try:
            entries = read_object(io.BytesIO(data[i:end]), reader)
        except MemoryError:
            raise
        except Exception:  # noqa: BLE001, S112 - a dictionary no reader can parse is no stream to anyone
            continue
        if not isinstance(entries, DictionaryObject):
            continue
        key = (int(m.group(1)), int(m.group(2)))
        flt = _resolve(entries.get("/Filter"))
        items = list(flt) if isinstance(flt, ArrayObject) else [flt] if flt is not None else []
        names = [str(n) if isinstance(n, NameObject) else "" for n in map(_resolve, items)]
        parms = _resolve(entries.get("/DecodeParms"))
        parm_list = [_resolve(p) for p in parms] if isinstance(parms, ArrayObject) else [parms]
        parm_list = (parm_list + [None] * len(names))[:len(names)]
        for stop in _stream_ends(data, body, _resolve(entries.get("/Length"))):
            raw: memoryview = view[body:stop]
            if encryption is not None:
                try:
                    obj = StreamObject()
                    obj.update(entries)
                    obj._data = bytes(raw)
                    raw = memoryview(encryption.decrypt_object(obj, key[0], key[1])._data)
                except MemoryError:
                    raise
                except Exception:  # noqa: BLE001, S112 - data that does not decrypt does not decode either
                    continue
            yield key, raw, names, parm_list


def _stream_ends(data: bytes, body: int, length: Any) -> set[int]:
    """Where a reader may take the stream data to end: the declared ``/Length`` when ``endstream`` follows it
    there, and the first ``endstream`` (without the end of line before it). Both when they differ."""
    found = data.find(b"endstream", body)
    if found < 0:
        stops = {len(data)}
    else:
        stop = found
        if data[stop - 2:stop] == b"\r\n" and stop - 2 >= body:
            stop -= 2
        elif data[stop - 1:stop] in (b"\n", b"\r") and stop - 1 >= body:
            stop -= 1
        stops = {stop}
    if (isinstance(length, int) and 0 <= length <= len(data) - body
            and data.startswith(b"endstream", _skip_space(data, body + length))):
        stops.add(body + length)
    return stops


def _page_contents(reader: Any) -> list[list[tuple[int, int]]]:
    """For every page, the keys of the content streams it lists (repeats kept)."""
    from pypdf.errors import LimitReachedError
    from pypdf.generic import ArrayObject, IndirectObject

    pages: list[list[tuple[int, int]]] = []
    if reader is None:
        return pages
    try:
        for page in reader.pages:
            ref = page.get("/Contents")
            refs = ref.get_object() if isinstance(ref, IndirectObject) else ref
            items = refs if isinstance(refs, ArrayObject) else [ref]
            pages.append([(r.idnum, r.generation) for r in items if isinstance(r, IndirectObject)])
    except (LimitReachedError, MemoryError):
        raise
    except Exception:  # noqa: BLE001 - a broken page tree: pdfium decides; every stream was counted once already
        return pages
    return pages


_FLATE = ("/FlateDecode", "/Fl")
_PYPDF_DECODERS = {
    "/LZWDecode": "LZWDecode", "/LZW": "LZWDecode",
    "/RunLengthDecode": "RunLengthDecode", "/RL": "RunLengthDecode",
    "/FlateDecode": "FlateDecode", "/Fl": "FlateDecode",
}
_NOT_HEX = re.compile(rb"[^0-9A-Fa-f\x00\t\n\x0c\r ]")
_NOT_A85 = re.compile(rb"[^!-uz\x00\t\n\x0c\r ]")


def ascii_hex_decode(data: bytes) -> bytes:
    """ASCIIHexDecode as a lenient reader does it: up to ``>`` or the first byte that is not a hex digit or space,
    an odd last digit padded with 0."""
    import binascii

    m = _NOT_HEX.search(data)
    digits = (data[:m.start()] if m else data).translate(None, _WS)
    if len(digits) % 2:
        digits += b"0"
    return binascii.unhexlify(digits)


def ascii85_decode(data: bytes) -> bytes:
    """ASCII85Decode as a lenient reader does it: up to ``~>`` or the first byte outside the alphabet, ``z`` for four
    zero bytes, a short last group padded with ``u``. The standard library's decoder runs at ~2 MB/s in pure
    Python, and ReportLab writes every stream through this filter; this one does the arithmetic on big integers,
    one 64-bit lane per group (~35 MB/s), without numpy, whose import would add ~75 MB to the reading process."""
    m = _NOT_A85.search(data)
    text = (data[:m.start()] if m else data).translate(None, _WS).replace(b"z", b"!!!!!")
    full = len(text) - len(text) % 5
    out = [_a85_groups(text[i:min(i + _A85_STEP, full)]) for i in range(0, full, _A85_STEP)]
    rest = len(text) - full
    if rest > 1:
        value = 0
        for c in text[full:] + b"u" * (5 - rest):
            value = value * 85 + c - 33
        out.append((value & 0xFFFFFFFF).to_bytes(4, "big")[:rest - 1])
    return b"".join(out)


_A85_STEP = 5 * 8192
_A85_OFFSET = (33 * (85**4 + 85**3 + 85**2 + 85 + 1)).to_bytes(8, "little")


def _a85_groups(text: bytes) -> bytes:
    """Whole five-character groups to four bytes each: the k-th digit of every group goes to its own 64-bit lane
    of one integer, so five multiply-adds decode them all (a group is below 85**5 < 2**33: no carry between lanes);
    a group over 2**32 wraps, as in pdfium."""
    n = len(text) // 5
    value = 0
    for k in range(5):
        lanes = bytearray(8 * n)
        lanes[0::8] = text[k::5]
        value = value * 85 + int.from_bytes(lanes, "little")
    values = (value - int.from_bytes(_A85_OFFSET * n, "little")).to_bytes(8 * n, "little")
    out = bytearray(4 * n)
    for i in range(4):
        out[i::4] = values[3 - i::8]
    return bytes(out)


class _Damaged(Exception):
    """A stage that does not decode: the reader stops there too, with nothing to show for the stream."""


class _Budget:
    """Decoded bytes, every stage of every filter chain, counted per stream and for the whole document."""

    def __init__(self, *, max_stream_mb: float, max_total_mb: float) -> None:
        self.per_stream = int(max_stream_mb * _MB)
        self.budget = int(max_total_mb * _MB)
        self.total = 0

    def room(self, stream_used: int) -> int:
        """How many more bytes this stream may produce before a budget is exceeded."""
        return max(0, min(self.per_stream - stream_used, self.budget - self.total))

    def count(self, n: int, stream_used: int = 0) -> None:
        self.total += n
        if stream_used > self.per_stream or self.total > self.budget:
            raise too_large()

    def stream(self, raw: memoryview, filters: list[str], parms: list[Any]) -> int:
        """Decode ``raw`` through ``filters`` stage by stage; return the size of what the last stage produced.

        The last Flate stage is only counted (its predictor, if any, cannot make it bigger); a stage that
        feeds another is decoded in full, predictor included, within what is left of the budget. ``/Crypt``
        passes the data on (the document's decryption was applied already). An image codec (DCT, JPX, CCITT,
        JBIG2) or an unknown filter ends the count: images are decoded only when OCR renders their page.
        """
        data: bytes | memoryview = raw
        used, size = 0, len(raw)
        for i, name in enumerate(filters):
            if name == "/Crypt":
                continue
            last = i == len(filters) - 1
            try:
                if name in _FLATE and last:
                    return self._count_inflate(data, used)
                if name in ("/ASCIIHexDecode", "/AHx"):  # these two shrink what they read
                    data = ascii_hex_decode(bytes(data))
                elif name in ("/ASCII85Decode", "/A85"):
                    data = ascii85_decode(bytes(data))
                elif name in _PYPDF_DECODERS:
                    data = self._decode(_PYPDF_DECODERS[name], bytes(data), parms[i], used)
                else:
                    return size
            except _Damaged:
                return 0
            size = len(data)
            used += size
            self.count(size, used)
        return size

    def _count_inflate(self, data: bytes | memoryview, used: int) -> int:
        """Inflate with ``max_length`` on every call (never more than the budget has left, plus one byte, and at
        most one chunk at a time) and keep nothing: the bytes are only counted."""
        inflater = zlib.decompressobj()
        produced = 0
        view = memoryview(data)
        try:
            for pos in range(0, len(view), _CHUNK):
                pending: bytes | memoryview = view[pos:pos + _CHUNK]
                while True:
                    limit = min(_CHUNK, self.room(used + produced) + 1)
                    chunk = inflater.decompress(pending, limit)
                    produced += len(chunk)
                    self.count(len(chunk), used + produced)
                    pending = inflater.unconsumed_tail
                    if inflater.eof or (not pending and len(chunk) < limit):
                        break
                if inflater.eof:
                    break
        except zlib.error:
            pass  # a damaged stream: a reader stops where zlib does; what came out until then is counted
        return produced

    def _decode(self, decoder: str, data: bytes, parms: Any, used: int) -> bytes:
        """One stage through pypdf's decoder, its output limited to what is left of the budget."""
        import pypdf.filters
        from pypdf import apply_configuration
        from pypdf.errors import LimitReachedError
        from pypdf.generic import DictionaryObject

        room = self.room(used) + 1  # never 0: pypdf reads 0 as "no limit"
        try:
            with apply_configuration(
                zlib_maximum_output_length=room, lzw_maximum_output_length=room, run_length_maximum_output_length=room
            ):
                out = getattr(pypdf.filters, decoder).decode(
                    data, parms if isinstance(parms, DictionaryObject) else DictionaryObject()
                )
        except LimitReachedError as e:
            raise too_large() from e
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - a stage that does not decode: the reader stops there too
            raise _Damaged from e
        return out.encode("latin-1") if isinstance(out, str) else bytes(out)


def guard_pdf(
    data: bytes,
    *,
    max_file_mb: float = MAX_FILE_MB,
    max_pages: int = MAX_PAGES,
    max_stream_mb: float = MAX_STREAM_MB,
    max_total_inflated_mb: float = MAX_DECODED_MB,
) -> int:
    """The page count of a PDF we are willing to parse, or :class:`IngestError` with the reason."""
    import pypdfium2 as pdfium

    check_pdf_bytes(
        data, max_file_mb=max_file_mb, max_stream_mb=max_stream_mb, max_total_inflated_mb=max_total_inflated_mb
    )
    try:
        pdf = pdfium.PdfDocument(data)  # pdfium tries the empty user password itself
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():
            raise IngestError(
                "The PDF is password-protected. Remove the password (or export an unprotected copy) "
                "and upload it again.",
                code="encrypted",
            ) from e
        raise IngestError("The PDF is damaged and could not be opened.", code="corrupt") from e
    try:
        n = len(pdf)
    finally:
        pdf.close()
    if n == 0:
        raise IngestError("The PDF has no pages.", code="corrupt")
    if n > max_pages:
        raise IngestError(f"The PDF has {n} pages, over the {max_pages}-page limit.", code="too_many_pages")
    return n
