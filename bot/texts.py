"""Every text a chat user reads that is not an answer, in one place, so Slack and Teams say the same thing.

Texts are plain: Slack escapes them with ``bot.slack.render.plain``, Teams sends them as they are. Where the
platforms differ (help, Teams' channel sync) the text names its platform. No text here is built from an
exception's message: each error class has its fixed text, saying what to do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from connectors.download import (
    BlockedAddressError,
    DeadlineError,
    DownloadError,
    HttpStatusError,
    NotAPdfError,
    TooLargeError,
)
from connectors.store_api import DocInfo
from pipelines.file_names import family_key
from pipelines.models import Answer, IngestProgress, IngestResult

# work the journal could not take (a full disk, a lock): only where the platform does not re-send it (a command)
NOT_RECORDED = "Sorry — I couldn't take that in just now, so I didn't start on it. Please try again in a minute."
# one person's waiting questions and uploads reached CITEBOT_MAX_QUEUED_PER_USER: this one was not taken
QUEUE_FULL = (
    "You have {n} questions or files waiting for me already, so I didn't take this one. I'll get to those first; "
    "please send it again once they're answered."
)
APOLOGY = "Sorry — something went wrong while I worked on that. I've logged it; please try again in a minute."

# --- help and commands ------------------------------------------------------------------------------

SLACK_HELP_TEXT = (
    "*Citebot* answers questions about the PDFs shared here, quoting them.\n"
    "• Mention me with a question; I reply in a thread and answer follow-ups there without a new mention.\n"
    "• `/citebot <question>` answers privately: only you see the answer.\n"
    "• Upload a PDF to this channel and I index it (scanned pages are OCR'd).\n"
    "• Use 👍 or 👎 under an answer (or react with them) to tell us whether it helped; 👎 asks what was wrong.\n"
    "• Commands, as `/citebot docs` or `@citebot docs`: `help`, `docs` (what I have indexed here), "
    "`forget <file>` (uploader or admin), `stats`."
)
TEAMS_HELP_TEXT = (
    "**Citebot** answers questions about your PDFs, quoting them.\n\n"
    "- In a channel, @mention me with a question; I reply in the thread.\n"
    "- In a personal chat with me, just ask. Send me a PDF here and I index it for this chat.\n"
    "- In a group chat, @mention me (Teams gives me only those messages, and no files there).\n"
    "- `@Citebot sync` in a channel indexes the PDFs in the channel's Files tab.\n"
    "- Use 👍/👎 under an answer to tell us whether it helped.\n"
    "- Commands: `help`, `docs` (what I have indexed here), `forget FILE` (the uploader), `stats`, `sync`."
)
SLACK_FORGET_USAGE = "Tell me which file: `/citebot forget handbook.pdf` (`/citebot docs` lists them)."


def docs_text(docs: Sequence[DocInfo]) -> str:
    if not docs:
        return "No PDFs are indexed here yet. Upload one to this channel and I'll index it."
    keys = Counter(family_key(d.file) for d in docs)
    lines = [
        f"• {d.file} — {d.pages} pages, {d.chunks} passages (added {d.uploaded_at[:10]}"
        + (f", uploaded by {d.uploaded_by or 'unknown'}, another file here has a name like it)"
           if keys[family_key(d.file)] > 1 else ")")
        for d in docs
    ]
    return f"{len(docs)} PDF{'s' if len(docs) != 1 else ''} indexed here:\n" + "\n".join(lines)


def stats_text(stats: dict[str, int]) -> str:
    return f"{stats['documents']} documents, {stats['pages']} pages, {stats['chunks']} passages indexed here."


def forget_not_found_text(name: str) -> str:
    return f"No document called “{name}” here. `docs` lists them."


def forget_not_allowed_text(file: str) -> str:
    return f"Only the person who uploaded “{file}” or an admin can remove it."


def forgot_text(file: str) -> str:
    return f"Removed “{file}”; I will no longer quote it here."


# --- where a quote comes from -------------------------------------------------------------------------


def pages_text(page_start: int, page_end: int) -> str:
    """``p. 12``, or ``pp. 12–13`` for a span (an end of 0 or before the start is no span)."""
    return f"p. {page_start}" if page_end <= page_start else f"pp. {page_start}–{page_end}"


def location_text(file: str, page_start: int, page_end: int, section: str, *, whole_section: bool = False) -> str:
    """A citation's location, on every platform and in the CLI: ``handbook.pdf · p. 12 · Parental leave``, the
    section as its innermost heading, or its whole path (``4 Leave > 4.2 Parental leave``) with
    ``whole_section`` (Slack, which has the room)."""
    heading = section if whole_section else section.split(" > ")[-1]
    return " · ".join(x for x in (file, pages_text(page_start, page_end), heading) if x)


def choice_label(answer: Answer, n: int, max_chars: int = 75) -> str:
    """The ``n``-th reading of a "which one?" answer as a button or card action names it: ``2. ARTICLE VI
    LIABILITY · contract.pdf``, from the citation the answer numbers it by (Slack: a button's 75 characters)."""
    c = next((c for c in answer.citations if c.n == n), None)
    where = f"{c.section.split(' > ')[-1] or pages_text(c.page_start, c.page_end)} · {c.file}" if c else ""
    label = f"{n}. {where}" if where else f"{n}."
    return label if len(label) <= max_chars else label[: max_chars - 1].rstrip() + "…"


def quote_lines(quote: str) -> list[str]:
    """A quote's lines as every platform shows them: each line's runs of white space as one space, blank lines
    dropped. A quoted table keeps one row per line (``Year | Revenue``, then ``2020 | 78.9``), a list one item."""
    return [" ".join(line.split()) for line in quote.splitlines() if line.strip()]


# --- answers and feedback ----------------------------------------------------------------------------


# What a 👎 can say was wrong (stored as the key, shown as the label); both platforms and `citebot feedback`.
FEEDBACK_CHOICES: dict[str, str] = {
    "wrong_passage": "quoted the wrong passage",
    "missing_information": "left out information",
    "should_have_refused": "should have said the PDFs don't answer it",
    "other": "something else",
}


def searching_text(n_documents: int) -> str:
    """The status shown while an answer is worked on: "Searching 3 PDFs…"."""
    if n_documents <= 0:
        return "Searching…"
    return f"Searching {n_documents} PDF{'s' if n_documents != 1 else ''}…"


def suggested_question(topic: str, document: str = "") -> str:
    """A suggested prompt from a heading: "What does “Staff Handbook” say about parental leave?"."""
    topic = topic if topic.isupper() or topic[1:2].isupper() else topic[:1].lower() + topic[1:]
    if document:
        return f"What does “{document}” say about {topic}?"
    return f"What do the PDFs say about {topic}?"


def about_question(document: str) -> str:
    """The suggested prompt for a document with a title and no topic under it."""
    return f"What is “{document}” about?"


SUGGESTED_PROMPTS_TITLE = "Ask about these PDFs"
ASSISTANT_GREETING = (
    "Hi! Ask me about the PDFs in the channel you are viewing (if you are a member) and the PDFs you upload here."
    " I quote them with file and page, and only you see this conversation."
)
ASSISTANT_GREETING_NO_CHANNEL = (
    "Hi! Ask me about the PDFs in the channels you are a member of and the PDFs you upload here."
    " I quote them with file and page, and only you see this conversation."
)

# --- uploads -----------------------------------------------------------------------------------------


def indexing_text(file: str) -> str:
    """The status message posted when an upload's work starts."""
    return f"Indexing {file}…"


def progress_text(p: IngestProgress) -> str:
    if p.phase in ("parsing", "ocr") and p.pages_total:
        verb = "Reading scanned pages of" if p.phase == "ocr" else "Indexing"
        return f"{verb} {p.file}… {p.pages_done}/{p.pages_total} pages"
    if p.phase == "embedding":
        return f"Indexing {p.file}… embedding passages"
    if p.phase == "writing":
        return f"Indexing {p.file}… saving"
    return f"Indexing {p.file}…"


def ingest_result_text(r: IngestResult) -> str:
    if r.status == "failed":
        return f"I couldn't index {r.file}: {r.error or 'unknown reason'}"
    if r.status == "unchanged":
        return f"{r.file} is already indexed here ({r.pages} pages, {r.chunks} passages)."
    ocr = f", {r.ocr_pages} scanned pages read with OCR" if r.ocr_pages else ""
    skipped = (
        f" Pages {', '.join(map(str, r.skipped_pages))} could not be read and were skipped."
        if r.skipped_pages
        else ""
    )
    replaced = " It replaces the earlier version." if r.replaced_doc_id else ""
    name = r.file
    if r.renamed_from:
        name = r.renamed_from
        replaced = f" It is indexed as {r.file} because {r.renamed_from} was uploaded by someone else."
    return f"Indexed {name}: {r.pages} pages, {r.chunks} passages{ocr}.{replaced}{skipped} Ask me about it!"


def too_large_text(file: str, max_file_mb: float) -> str:
    return f"I couldn't index {file}: the file is larger than the {max_file_mb:.0f} MB limit."


def download_failed_text(file: str, error: DownloadError, *, max_file_mb: float, timeout_s: float) -> str:
    """A fixed text per class of download failure, saying what to do; never the exception's own message."""
    if isinstance(error, TooLargeError):
        return too_large_text(file, max_file_mb)
    if isinstance(error, DeadlineError):
        why = f"the download took longer than {timeout_s:.0f} s. Please try again in a few minutes"
    elif isinstance(error, BlockedAddressError):
        why = "its link points somewhere I never download from. Please upload the PDF itself here"
    elif isinstance(error, HttpStatusError) and error.status in (401, 403):
        why = "I'm not allowed to download that file (check the bot's file permissions)"
    elif isinstance(error, HttpStatusError):
        why = f"the file server answered HTTP {error.status}"
    elif isinstance(error, NotAPdfError) and error.web_page:
        why = "the download returned a web page instead of the file (check the bot token)"
    elif isinstance(error, NotAPdfError):
        why = "that file is not a PDF, whatever its name says"
    else:
        why = "I couldn't download it. Please try uploading it again in a few minutes"
    return f"I couldn't index {file}: {why}."


UPLOADS_BUSY_TEXT = (
    "Too many uploads are waiting to be indexed right now, so I haven't started on {file}. "
    "Please share it again in a few minutes."
)
INGEST_FAILED_TEXT = "I couldn't index {file}: something went wrong on my side. Please try uploading it again."
EXTERNAL_FILE_TEXT = (
    "I can only read files uploaded to Slack: {file} is a link to a file stored elsewhere. "
    "Download it and upload the PDF itself to this channel."
)
NOT_A_PDF = "I can only index PDFs, and {name} isn't one."

# --- Teams' channel sync -----------------------------------------------------------------------------

GRAPH_NOT_CONFIGURED = (
    "Channel sync needs Microsoft Graph, which is not configured for this bot: set TEAMS_APP_ID and "
    "TEAMS_APP_PASSWORD and grant the app Files.Read.All (application permission, admin consent). "
    "Until then, send me PDFs in a personal chat."
)
SYNC_ONLY_IN_CHANNELS = "`sync` reads a channel's Files tab, so use it in a channel. Here, just send me the PDF."
NO_CHANNEL_PDFS = "I found no PDFs in this channel's Files tab. Upload some there, then `@Citebot sync` again."
SYNC_LOOKING = "Looking for PDFs in this channel's files…"


def sync_progress_text(i: int, n: int, file: str) -> str:
    return f"Syncing {i}/{n}: {file}…"


def sync_summary_text(lines: Sequence[str]) -> str:
    plural = "s" if len(lines) != 1 else ""
    return f"Synced {len(lines)} PDF{plural} from this channel's files:\n\n" + "\n".join(f"- {x}" for x in lines)


def channel_files_unreadable_text(reason: str) -> str:
    """``reason``: a ``GraphError``'s message, which Citebot writes for admins (what to grant, what to set)."""
    return f"I couldn't read this channel's files: {reason}."
