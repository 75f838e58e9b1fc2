"""Checks of a binarized data folder before fairseq reads it, and of a token budget against it (no fairseq
import).

fairseq fails deep inside on a missing folder, dictionary or split, and cannot memory-map an empty
``.bin`` file; these checks name the problem and the flag or script that fixes it.
"""

import os

import numpy as np

from ..errors import AutoAssistConfigError


def data_paths(data):
    """The folders of ``data`` (fairseq's ``os.pathsep``-separated list)."""
    return data.split(os.pathsep) if data else [""]


def check_data_folders(data, source_lang, target_lang):
    for path in data_paths(data):
        if not os.path.isdir(path):
            raise AutoAssistConfigError(
                f"data folder {path!r} does not exist; pass a prepared data-bin folder "
                "(scripts/prepare_multi30k.py writes one) as the first argument"
            )
        for lang in (source_lang, target_lang):
            dictionary = os.path.join(path, f"dict.{lang}.txt")
            if lang is not None and not os.path.isfile(dictionary):
                raise AutoAssistConfigError(
                    f"{dictionary} is missing; binarize with fairseq-preprocess "
                    "(scripts/prepare_multi30k.py) or check --source-lang/--target-lang"
                )


def check_split(data, split, source_lang, target_lang):
    path = data_paths(data)[0]
    prefix = os.path.join(path, f"{split}.{source_lang}-{target_lang}.")
    reverse = os.path.join(path, f"{split}.{target_lang}-{source_lang}.")
    found = [p for p in (prefix, reverse) if os.path.isfile(p + f"{source_lang}.idx")]
    if not found:
        raise AutoAssistConfigError(
            f"split '{split}' is missing from {path} (no {prefix}{source_lang}.idx); "
            "prepare it or choose another with --train-subset/--valid-subset/--gen-subset"
        )
    data_file = found[0] + f"{source_lang}.bin"
    if os.path.isfile(data_file) and os.path.getsize(data_file) == 0:
        raise AutoAssistConfigError(
            f"the split '{split}' in {path} has no sentence pairs ({data_file} is empty); "
            "re-run the preparation on non-empty files"
        )


def check_token_budget(split, src_sizes, tgt_sizes, max_tokens, max_positions, flag):
    """Refuse a token budget (``flag``, e.g. ``--max-tokens``) below the longest pair of ``split`` within
    ``max_positions`` (source, target): fairseq would otherwise stop with an assertion inside its batcher, or,
    for the training split, silently skip every longer pair."""
    if not max_tokens:
        return
    src_sizes = np.asarray(src_sizes)
    tgt_sizes = np.zeros_like(src_sizes) if tgt_sizes is None else np.asarray(tgt_sizes)
    sizes = np.maximum(src_sizes, tgt_sizes)
    if max_positions is not None:
        sizes = np.where((src_sizes <= max_positions[0]) & (tgt_sizes <= max_positions[1]), sizes, 0)
    if len(sizes) == 0 or sizes.max() <= max_tokens:
        return
    longest = int(sizes.argmax())
    raise AutoAssistConfigError(
        f"a budget of {max_tokens} tokens per batch is below the longest pair of split '{split}' (pair {longest}: {int(sizes[longest])} "
        f"tokens on its longer side, {int((sizes > max_tokens).sum())} pairs over the budget); raise {flag} to at "
        f"least {int(sizes[longest])}, or drop long pairs with --max-source-positions/--max-target-positions"
    )
