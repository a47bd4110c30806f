"""One module per stage of the flows, its thin Prefect task at the bottom."""
