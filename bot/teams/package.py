"""Build the Teams app package: ``manifest.json`` (app id filled in) plus the two icons, zipped.

The icons are drawn here with Pillow rather than committed as binaries: ``color.png`` 192×192
(full colour) and ``outline.png`` 32×32 (white on transparent), the sizes Teams requires.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

# package data beside this module, so `citebot teams package` works from an installed wheel too
MANIFEST_TEMPLATE = Path(__file__).resolve().parent / "manifest.json"
PLACEHOLDER = "{{TEAMS_APP_ID}}"
ACCENT = (43, 87, 151)
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class PackageError(Exception):
    """The package cannot be built; the message says what to fix."""


@dataclass(frozen=True)
class Publisher:
    """Who publishes the app, as Teams shows it before anyone installs it: the manifest's ``developer`` fields.
    ``None`` keeps the template's placeholder (the package still uploads as a custom app); :meth:`placeholders`
    names those left so, for the command to say."""

    name: str | None = None
    website_url: str | None = None
    privacy_url: str | None = None
    terms_url: str | None = None

    # the manifest field each one fills, and the option and setting that set it
    FIELDS: ClassVar[dict[str, tuple[str, str, str]]] = {
        "name": ("name", "--developer-name", "CITEBOT_TEAMS_DEVELOPER_NAME"),
        "website_url": ("websiteUrl", "--website-url", "CITEBOT_TEAMS_WEBSITE_URL"),
        "privacy_url": ("privacyUrl", "--privacy-url", "CITEBOT_TEAMS_PRIVACY_URL"),
        "terms_url": ("termsOfUseUrl", "--terms-url", "CITEBOT_TEAMS_TERMS_URL"),
    }

    def __post_init__(self) -> None:
        if self.name is not None and not 0 < len(self.name.strip()) <= 32:
            raise PackageError("the developer name (--developer-name, CITEBOT_TEAMS_DEVELOPER_NAME) must be 1 to 32 "
                               "characters, as Teams allows")
        for attr in ("website_url", "privacy_url", "terms_url"):
            url = getattr(self, attr)
            if url is not None and not (url.lower().startswith("https://") and 8 < len(url) <= 2048):
                _, option, env = self.FIELDS[attr]
                raise PackageError(f"{option} ({env}) must be an https:// address, as Teams requires: {url!r}")

    def placeholders(self) -> list[str]:
        """The options (with their settings) left unset, whose manifest field keeps the template's placeholder."""
        return [f"{option} ({env})" for attr, (_, option, env) in self.FIELDS.items() if getattr(self, attr) is None]

    def fill(self, developer: dict[str, Any]) -> dict[str, Any]:
        """The manifest's ``developer`` object with what is set here."""
        return developer | {field: getattr(self, attr).strip() for attr, (field, _, _) in self.FIELDS.items()
                            if getattr(self, attr) is not None}


def _draw_mark(size: int, fg: tuple[int, int, int, int], bg: tuple[int, int, int, int]) -> bytes:
    """A speech bubble with a quotation mark: Citebot's mark, drawn at ``size`` pixels."""
    from PIL import Image, ImageDraw

    img = Image.new("RGBA", (size, size), bg)
    d = ImageDraw.Draw(img)
    m = size // 8
    w = max(1, size // 16)
    d.rounded_rectangle((m, m, size - m, size - 3 * m), radius=size // 6, outline=fg, width=w)
    d.polygon([(size // 3, size - 3 * m), (size // 3, size - m - m // 2), (size // 2, size - 3 * m)], fill=fg)
    r = size // 12
    for cx in (size * 5 // 12, size * 7 // 12):
        cy = size * 5 // 12
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fg)
        d.line((cx + r // 2, cy, cx - r // 2, cy + 2 * r), fill=fg, width=max(1, r // 2))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def color_icon() -> bytes:
    return _draw_mark(192, (255, 255, 255, 255), (*ACCENT, 255))


def outline_icon() -> bytes:
    return _draw_mark(32, (255, 255, 255, 255), (0, 0, 0, 0))


def render_manifest(app_id: str, template: Path = MANIFEST_TEMPLATE, publisher: Publisher | None = None
                    ) -> dict[str, Any]:
    if not app_id or not _GUID.match(app_id):
        raise PackageError(
            "TEAMS_APP_ID must be the bot's Microsoft App ID (a GUID like 00000000-0000-0000-0000-000000000000); "
            "find it on the Azure Bot resource's Configuration page"
        )
    text = template.read_text(encoding="utf-8").replace(PLACEHOLDER, app_id)
    manifest: dict[str, Any] = json.loads(text)
    manifest["developer"] = (publisher or Publisher()).fill(manifest["developer"])
    return manifest


def build_package(app_id: str, out: Path, *, template: Path = MANIFEST_TEMPLATE,
                  publisher: Publisher | None = None) -> Path:
    """Write the app package zip to ``out`` (manifest.json, color.png, outline.png at the root), the developer
    fields from ``publisher`` where it sets them."""
    manifest = render_manifest(app_id, template, publisher)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
        zf.writestr(manifest["icons"]["color"], color_icon())
        zf.writestr(manifest["icons"]["outline"], outline_icon())
    return out
