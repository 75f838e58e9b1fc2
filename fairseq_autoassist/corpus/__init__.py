"""Corpus preparation and cleaning, before any training: raw files to a fairseq data-bin folder (``prepare_corpus``,
the ``autoassist-prepare`` command, and ``preparation``, what its presets share), reading and checking raw parallel
text (``raw_corpus``), the static cleaning rules (``cleaning``) and Moses-tokenized references back to raw text
(``detokenize``). Built on the package's core; the training plugin never imports it."""
