"""Checks of a binarized data folder before fairseq reads it (no fairseq import).

fairseq fails deep inside on a missing folder, dictionary or split, and cannot memory-map an empty
``.bin`` file; these checks name the problem and the flag or script that fixes it.
"""

import os

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
