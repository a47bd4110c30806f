"""Local harnesses that start servers for trying and testing: a PostgreSQL of its own, a trial cluster. Not product."""
