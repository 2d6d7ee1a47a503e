"""``citebot bench ...``: benchmarks of the retrieval, the query path, ingestion and the two chat bots.

The bot benchmarks import :mod:`bot` (they measure it); nothing in :mod:`bot` but the CLI imports them.
"""
