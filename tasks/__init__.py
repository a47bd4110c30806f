"""The work behind the flows, grouped by kind (docs/ARCHITECTURE.md has the map and what may import what)."""
