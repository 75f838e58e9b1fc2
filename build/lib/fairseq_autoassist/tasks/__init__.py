"""fairseq tasks of this package (fairseq also auto-imports this folder from --user-dir)."""
