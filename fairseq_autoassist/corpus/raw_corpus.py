"""Raw parallel text as distributed (plain or gzipped, one sentence per line), read with errors that name
the file and line; the corruption of a noisy copy and the list of its corrupted pairs (no fairseq import). Used
by autoassist-prepare, scripts/research/make_noisy_corpus.py, scripts/research/paracrawl_report.py and
``--autoassist-noise-ids``."""

import gzip
import os
import shutil

import numpy as np

from ..data.noise_list import NOISE_LIST, read_noise, write_noise  # noqa: F401  (the preparation reads them here)
from ..errors import AutoAssistConfigError


class PreparationError(RuntimeError):
    """Bad input; the message names the file or flag to fix."""


def exit_code(action, logger):
    """A script's exit status: 0 once ``action()`` returns, 2 after logging a ``PreparationError`` (or an
    ``AutoAssistConfigError``: a data folder or option that does not fit) as one line."""
    try:
        action()
    except (PreparationError, AutoAssistConfigError) as error:
        logger.error("%s", error)
        return 2
    return 0


def find_raw_file(raw_dir, stem, lang):
    for name in (f"{stem}.{lang}", f"{stem}.{lang}.gz"):
        path = os.path.join(raw_dir, name)
        if os.path.isfile(path):
            return path
    return None


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return decode_lines(f.read(), path)


def decode_lines(data, where):
    """The UTF-8 lines of ``data`` (read from ``where``), refusing bytes that are not UTF-8 with the line's number."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, raw in enumerate(lines, start=1):
        try:
            out.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as error:
            raise PreparationError(
                f"{where}: line {number} is not valid UTF-8 ({error.reason} at byte {error.start}); "
                "fix or re-encode the file"
            ) from None
    if not out:
        raise PreparationError(f"{where} is empty")
    return out


def read_parallel(raw_dir, stem, src, tgt):
    paths = []
    for lang in (src, tgt):
        path = find_raw_file(raw_dir, stem, lang)
        if path is None:
            raise PreparationError(
                f"{os.path.join(raw_dir, stem)}.{lang}[.gz] is missing; check --raw-dir and --src/--tgt"
            )
        paths.append(path)
    return check_side_by_side(paths, [read_lines(p) for p in paths])


def check_side_by_side(paths, sides):
    """``sides`` (the lines of ``paths``), refused unless both have as many lines."""
    if len(sides[0]) != len(sides[1]):
        raise PreparationError(
            f"{paths[0]} has {len(sides[0])} lines but {paths[1]} has {len(sides[1])}; "
            "line i of one side must translate line i of the other"
        )
    return sides


def nonempty_pairs(sides):
    """The indices of the pairs of ``sides`` (two lists of lines) whose two sides both hold text."""
    return [i for i, (source, target) in enumerate(zip(*sides)) if source.strip() and target.strip()]


# The folder, inside a noisy copy's data folder, of the same corpus without those pairs (the clean-only oracle).
CLEAN_ONLY = "clean-only"
# The folder, inside a data folder, of the same corpus without its exact repeats (``autoassist-prepare --clean`` with
# every other filter off).
DEDUPLICATED = "deduplicated"
# The folder, inside a data folder, of its pairs' reference scores (autoassist-score, autoassist-reference).
SCORES_FOLDER = "scores"


def write_noisy_copy(raw_dir, out, src, tgt, source, target, noise):
    """A copy of the raw corpus ``raw_dir`` in ``out`` whose training pairs are ``source``/``target`` with the
    pairs ``noise`` (``{line: kind}``) listed in ``noise.tsv``; the other splits copied as they are. Returns the
    names of the copied files."""
    os.makedirs(out, exist_ok=True)
    for lang, lines in ((src, source), (tgt, target)):
        with open(os.path.join(out, f"train.{lang}"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    copied = []
    for stem in sorted({name.split(".")[0] for name in os.listdir(raw_dir)} - {"train"}):
        paths = [find_raw_file(raw_dir, stem, lang) for lang in (src, tgt)]
        if all(paths):
            for path in paths:
                shutil.copyfile(path, os.path.join(out, os.path.basename(path)))
                copied.append(os.path.basename(path))
    write_noise(os.path.join(out, NOISE_LIST), noise)
    return copied


KINDS = {"misaligned": 0.30, "truncated": 0.20, "duplicate": 0.20, "untranslated": 0.15, "wrong_language": 0.15}
# Kinds outside the default mix (``--kinds`` adds them): the target's words in random order, and the target of the
# next line (sentence misalignment as document alignment makes it).
EXTRA_KINDS = ("shuffled", "neighbour")


def kind_counts(num_corrupted, proportions):
    """Whole counts per kind that add up to ``num_corrupted`` (largest remainders)."""
    names = list(proportions)
    total = sum(proportions.values())
    exact = np.array([num_corrupted * proportions[name] / total for name in names])
    counts = np.floor(exact).astype(int)
    for index in np.argsort(-(exact - counts))[: num_corrupted - counts.sum()]:
        counts[index] += 1
    return dict(zip(names, counts.tolist()))


def corrupt(source, target, share, seed, proportions=KINDS):
    """The noisy ``(source, target)`` lists and ``{line: kind}`` of the corrupted pairs."""
    rng = np.random.default_rng(seed)
    num_pairs = len(source)
    num_corrupted = int(round(share * num_pairs))
    if num_pairs < 2 or num_corrupted >= num_pairs:
        raise PreparationError(f"--share {share} of {num_pairs} pairs leaves no clean pair to draw from")
    corrupted = rng.permutation(num_pairs)[:num_corrupted]
    clean = np.setdiff1d(np.arange(num_pairs), corrupted)
    kinds = np.repeat(list(proportions), list(kind_counts(num_corrupted, proportions).values()))
    kinds = kinds[rng.permutation(len(kinds))]
    noisy_source, noisy_target = list(source), list(target)
    for line, kind in zip(corrupted.tolist(), kinds.tolist()):
        other = int(rng.choice(clean))
        if kind == "misaligned":
            noisy_target[line] = target[other]
        elif kind == "truncated":
            words = target[line].split()
            noisy_target[line] = " ".join(words[: int(rng.integers(1, max(1, len(words) // 2) + 1))])
        elif kind == "duplicate":
            noisy_source[line], noisy_target[line] = source[other], target[other]
        elif kind == "untranslated":
            noisy_target[line] = source[line]
        elif kind == "wrong_language":
            noisy_target[line] = source[other]
        elif kind == "shuffled":
            words = target[line].split()
            order = rng.permutation(len(words))
            if len(words) > 1 and (order == np.arange(len(words))).all():
                order = np.roll(order, 1)
            noisy_target[line] = " ".join(words[i] for i in order)
        elif kind == "neighbour":
            noisy_target[line] = target[(line + 1) % num_pairs]
        else:
            raise PreparationError(f"unknown noise kind {kind!r}; choose among {', '.join((*KINDS, *EXTRA_KINDS))}")
    return noisy_source, noisy_target, dict(zip(corrupted.tolist(), kinds.tolist()))
