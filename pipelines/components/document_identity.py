"""DocumentIdentifier: the indexing step that reads what a document is from its first pages (issuer, form and
period of a filing, or a report's title), whatever its file name; the rules are :mod:`pipelines.reading.identity`."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.reading.identity import DocumentIdentity, headline_of, read_identity
from pipelines.reading.layout import ParsedPdf

__all__ = ["DocumentIdentifier", "DocumentIdentity"]


@component
class DocumentIdentifier:
    """Reads a parsed PDF's identity (issuer, form, period; or its title) from its first pages.

    Usage::

        identifier = DocumentIdentifier(pages=3)
        identity = identifier.run(parsed=parsed)["identity"]  # DocumentIdentity(issuer="Adobe Inc.", ...)

    :param pages: how many first pages are read (a cover, and the page after it where a name printed as a logo
        is spelt out in a statement's heading).
    """

    def __init__(self, *, pages: int = 3) -> None:
        if not 1 <= pages <= 10:
            raise ValueError("pages must be between 1 and 10")
        self.pages = pages

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, pages=self.pages)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DocumentIdentifier:
        return default_from_dict(cls, data)

    @component.output_types(identity=DocumentIdentity)
    def run(self, parsed: ParsedPdf) -> dict[str, Any]:
        """:param parsed: the reader's pages.
        :returns: ``identity``, a :class:`DocumentIdentity` (empty when nothing was read)."""
        first = parsed.pages[: self.pages]
        texts = ["\n".join(line.text for line in page.lines) for page in first]
        headline = headline_of([(line.text, line.size) for line in first[0].lines]) if first else ""
        return {"identity": read_identity(texts, headline=headline)}
