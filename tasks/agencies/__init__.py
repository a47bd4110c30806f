"""Agencies: each one's requirements as data (``<agency>.toml``) and the rules that turn
a canonical :class:`~tasks.core.records.Metadata` into a valid CSV row for it."""
