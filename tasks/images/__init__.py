"""Pixels and files: checks, upload-ready JPEGs, embedded metadata, look-alikes, provenance, ZIP, the demo generator."""
