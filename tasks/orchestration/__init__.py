"""Everything that exists because of how Prefect behaves, kept apart from the work."""
