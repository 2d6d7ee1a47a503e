"""The chat platforms Citebot speaks, each with the top-level packages of its SDK: the one list that the metrics'
``platform`` label, the log levels of SDK chatter and the layer rules (``tests/test_layers.py``: no SDK below
``bot``) read. Only names live here; ``connectors`` imports no chat SDK.

A new platform is a key here and, in the same change, a member of :data:`bot.core.Platform` (a ``Literal``, which
mypy cannot derive), a ``ClaimKey`` factory, a scope helper in :mod:`pipelines.models`, its ``bot/<platform>/``
folder and its ``citebot serve`` subcommand; ``tests/test_where_to_add.py`` names whichever is missing.
"""

from __future__ import annotations

CHAT_SDKS: dict[str, tuple[str, ...]] = {
    "slack": ("slack_bolt", "slack_sdk"),
    "teams": ("microsoft_agents",),  # the Microsoft 365 Agents SDK
}
# What the chat SDKs are called when imported, whichever platform's.
SDK_PACKAGES: tuple[str, ...] = tuple(pkg for pkgs in CHAT_SDKS.values() for pkg in pkgs)
