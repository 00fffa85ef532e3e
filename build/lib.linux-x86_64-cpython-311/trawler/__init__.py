"""Trawler: a polite, fast, crash-safe web crawler."""

__version__ = "0.1.0"
