"""Upload transports: one interface (base.Transport, put = send + confirm), one module per protocol with its own
error mapper."""
