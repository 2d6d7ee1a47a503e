"""Build the Teams app package: ``manifest.json`` (app id filled in) plus the two icons, zipped.

The icons are drawn here with Pillow rather than committed as binaries: ``color.png`` 192×192
(full colour) and ``outline.png`` 32×32 (white on transparent), the sizes Teams requires.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

# package data beside this module, so `citebot teams package` works from an installed wheel too
MANIFEST_TEMPLATE = Path(__file__).resolve().parent / "manifest.json"
PLACEHOLDER = "{{TEAMS_APP_ID}}"
ACCENT = (43, 87, 151)
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class PackageError(Exception):
    """The package cannot be built; the message says what to fix."""


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


def render_manifest(app_id: str, template: Path = MANIFEST_TEMPLATE) -> dict[str, Any]:
    if not app_id or not _GUID.match(app_id):
        raise PackageError(
            "TEAMS_APP_ID must be the bot's Microsoft App ID (a GUID like 00000000-0000-0000-0000-000000000000); "
            "find it on the Azure Bot resource's Configuration page"
        )
    text = template.read_text(encoding="utf-8").replace(PLACEHOLDER, app_id)
    manifest: dict[str, Any] = json.loads(text)
    return manifest


def build_package(app_id: str, out: Path, *, template: Path = MANIFEST_TEMPLATE) -> Path:
    """Write the app package zip to ``out`` (manifest.json, color.png, outline.png at the root)."""
    manifest = render_manifest(app_id, template)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
        zf.writestr(manifest["icons"]["color"], color_icon())
        zf.writestr(manifest["icons"]["outline"], outline_icon())
    return out
