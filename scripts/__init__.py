"""Command-line scripts; importable as ``scripts.NAME`` from the repository root (for the tests)."""
