"""The commands Citebot understands on every platform, and the one dispatcher that runs them.

Slack reads them from ``/citebot <verb> <arg>`` and from the first word of a mention (:func:`mention_command`),
Teams from the first word of a message; each adapter parses its own event and decides what a word that is no
command means (``/citebot``: a private question; a mention: a question). The work and the reply text are the same
everywhere: :func:`run_command`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeGuard

from bot import texts
from bot.core import ChatContext, ChatCore

CoreVerb = Literal["docs", "stats", "forget"]
CORE_VERBS: tuple[CoreVerb, ...] = ("docs", "stats", "forget")


def is_core_verb(verb: str) -> TypeGuard[CoreVerb]:
    """``docs``, ``stats`` and ``forget``: the commands the chat core answers (``help`` is a text; ``sync``
    reads Teams' channel files)."""
    return verb in CORE_VERBS


def mention_command(text: str) -> tuple[str, str] | None:
    """``(verb, arg)`` when a message (mentions stripped) is a command, as Teams reads one: ``help``, ``docs``,
    ``stats`` or ``forget <file>`` as its first word (``forget`` alone is no command: there is nothing to forget);
    None for a question."""
    word, _, rest = " ".join(text.split()).partition(" ")
    verb = word.lower().strip("!/.")
    arg = rest.strip().strip("“”\"'`")
    if verb == "help" or (is_core_verb(verb) and (verb != "forget" or arg)):
        return verb, arg
    return None


def run_command(
    core: ChatCore, ctx: ChatContext, verb: CoreVerb, arg: str, *, scopes: Sequence[str], is_admin: bool
) -> str:
    """Run ``docs`` or ``stats`` over ``scopes``, or ``forget <arg>`` in the context's own scope; the reply text."""
    if verb == "docs":
        return texts.docs_text(core.documents(scopes))
    if verb == "stats":
        return texts.stats_text(core.stats(scopes))
    return core.forget(ctx, arg, is_admin=is_admin).message
