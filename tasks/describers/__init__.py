"""Describers: one interface, an offline implementation and a Gemini one."""
