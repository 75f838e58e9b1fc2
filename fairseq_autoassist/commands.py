"""The package's version and the console commands ``pip install`` gives, each declared once (setup.py reads this file;
``python -m fairseq_autoassist --help`` lists the commands, ``--version`` prints the version). No imports: setup.py
runs it before anything is installed."""

VERSION = "0.6.3"

COMMANDS = {
    "autoassist-prepare": ("fairseq_autoassist.corpus.prepare_corpus:main",
                           "any parallel corpus, any language pair, to a fairseq data-bin folder"),
    "autoassist-evaluate": ("fairseq_autoassist.evaluate:main",
                            "sacreBLEU and chrF, with signatures, of a checkpoint on a prepared split"),
    "autoassist-score": ("fairseq_autoassist.reference.scores:main",
                         "every pair's per-token loss under a trained checkpoint (a reference model), beside the data"),
    "autoassist-reference": ("fairseq_autoassist.reference.models:main",
                             "reference models by recipe (two halves, or a trusted corpus): their scores and cost"),
    "autoassist-filter": ("fairseq_autoassist.reference.filter_pairs:main",
                          "a prepared folder without the pairs two reference models find unlikely (dual "
                          "cross-entropy)"),
    "autoassist-benchmark": ("fairseq_autoassist.benchmark.command:main",
                             "the side-by-side benchmark of the selection policies (presets, resume, reports)"),
}


def command_parser(prog, description):
    """A console command's argument parser (``description``: its module's docstring), with the commands' log format
    set up."""
    import argparse
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    return argparse.ArgumentParser(prog=prog, description=description,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
