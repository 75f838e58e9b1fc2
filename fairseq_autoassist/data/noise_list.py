"""The list of a noisy corpus' corrupted pairs (``noise.tsv``): what ``--autoassist-noise-ids`` reads in training and
the preparation writes and carries (no fairseq import)."""

# The file of a noisy copy's corrupted pairs, written beside the raw corpus and carried into its data folder.
NOISE_LIST = "noise.tsv"


def write_noise(path, noise):
    """``noise.tsv``: a header, then ``line<TAB>kind`` for each corrupted pair (0-based lines)."""
    with open(path, "w") as f:
        f.write("line\tkind\n")
        f.writelines(f"{line}\t{kind}\n" for line, kind in sorted(noise.items()))


def read_noise(path):
    """``{line: kind}`` from a ``noise.tsv`` written by ``write_noise``."""
    with open(path) as f:
        rows = [row.split("\t") for row in f.read().splitlines()[1:] if row.strip()]
    return {int(row[0]): row[1] if len(row) > 1 else "" for row in rows}
