"""The dead-letter store (one interface, its backends) and the plain-text upload ledger."""
