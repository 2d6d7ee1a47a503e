"""What the deployment files are checked against: every environment variable name the settings object reads."""

from __future__ import annotations

from pydantic import AliasChoices

from connectors.settings import Settings


def setting_names() -> set[str]:
    """Every environment variable name the settings object reads."""
    names = set()
    for field, info in Settings.model_fields.items():
        if isinstance(info.validation_alias, AliasChoices):
            names |= {str(c) for c in info.validation_alias.choices}
        else:
            names.add(f"CITEBOT_{field.upper()}")
    return names
