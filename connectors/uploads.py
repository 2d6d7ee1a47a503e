"""The rules every upload meets, whichever platform or command it came from, each in one place.

* **What a PDF is.** By name or declared type (:func:`is_pdf_file`, before anything is fetched) and by its
  bytes (:func:`looks_like_pdf`: the ``%PDF-`` signature, whatever the name says).
* **How large it may be.** ``CITEBOT_MAX_FILE_MB`` in bytes (:func:`max_upload_bytes`, decimal megabytes as the
  texts say them): the chat core hands it to the download, which refuses a larger declared or streamed body
  (:func:`connectors.download.check_size`), and the PDF guard refuses larger bytes however they came.
* **How much reading it may take.** The defaults of every reading limit (:data:`MAX_FILE_MB`, :data:`MAX_PAGES`,
  the decompression budgets :data:`MAX_STREAM_MB` and :data:`MAX_DECODED_MB`, the text :data:`MAX_DOCUMENT_CHARS`
  and :data:`MAX_DOCUMENT_LINES`): the settings' defaults, and those of every reader built without settings.

No imports beyond the standard library: the reading child process (``pipelines/reading``) imports this too.
"""

from __future__ import annotations

PDF_MAGIC = b"%PDF-"
# Where the signature may be: some producers put a little junk before it.
MAGIC_WINDOW = 1024
BYTES_PER_MB = 1_000_000

MAX_FILE_MB = 50.0  # CITEBOT_MAX_FILE_MB
MAX_PAGES = 2000  # CITEBOT_MAX_PAGES
MAX_STREAM_MB = 256.0  # CITEBOT_MAX_STREAM_MB: most one PDF stream may decode to
MAX_DECODED_MB = 1024.0  # CITEBOT_MAX_DECODED_MB: all streams of one PDF decoded together
MAX_DOCUMENT_CHARS = 5_000_000  # CITEBOT_MAX_DOCUMENT_CHARS: text of the whole document
MAX_DOCUMENT_LINES = 60_000  # CITEBOT_MAX_DOCUMENT_ELEMENTS: its text lines (each kept as objects while indexing)


def looks_like_pdf(data: bytes) -> bool:
    """PDF files start with ``%PDF-`` (some producers put a little junk before it)."""
    return PDF_MAGIC in data[:MAGIC_WINDOW]


def is_pdf_file(name: str, *, file_type: str = "", mime_type: str = "") -> bool:
    """A file a platform announces is a PDF when its type (Slack's ``filetype``, Teams' ``fileType``), its MIME
    type or its name says so. Its bytes are checked again after the download (:func:`looks_like_pdf`)."""
    return file_type.lower() == "pdf" or mime_type.lower() == "application/pdf" or name.lower().endswith(".pdf")


def max_upload_bytes(max_file_mb: float) -> int:
    """The size cap in bytes for ``CITEBOT_MAX_FILE_MB``."""
    return int(max_file_mb * BYTES_PER_MB)
