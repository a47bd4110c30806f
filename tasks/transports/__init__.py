"""Upload transports: one interface (``base.Transport``), one module per protocol."""
