"""Loading fairseq 0.12 checkpoints: under torch >= 2.6, with one line for a file that cannot be read, and the
arrays AutoAssist keeps in them read back (``checkpointed_array``; no fairseq import at module level).

torch 2.6 made ``torch.load`` default to ``weights_only=True``; fairseq 0.12 checkpoints hold an
``argparse.Namespace`` and omegaconf containers, so every resume and every ``fairseq-generate``
would fail with "Weights only load failed". fairseq imports ``--user-dir`` modules before it
loads a checkpoint, so allow-listing those classes here fixes both without an environment
variable. Checkpoints also hold numpy scalars (the best validation BLEU, for example), so numpy's
array reconstruction and scalar types are allowed too. AutoAssist's own checkpointed state is only
tensors, lists, dicts and Python scalars.

A truncated or corrupt checkpoint (a full disk, a copy cut short) makes ``torch.load`` fail with one of
half a dozen exceptions from deep inside; ``explain_unreadable_checkpoints`` turns each into one line
that names the file and the checkpoints beside it to use instead. ``copy_checkpoints_atomically`` keeps fairseq's
own copies from cutting ``checkpoint_last.pt`` short in the first place.
"""

import argparse
import collections
import functools
import os
import shutil
import typing
import zipfile

import numpy as np
import torch

from .errors import AutoAssistConfigError, report_config_errors_in_one_line


def checkpointed_array(value, dtype):
    """A numpy copy, of ``dtype``, of an array AutoAssist saved in a checkpoint (a tensor, so that
    ``torch.load(weights_only=True)`` accepts it; or array-like)."""
    if isinstance(value, torch.Tensor):
        value = value.numpy()
    return np.array(value, dtype=dtype)


def _numpy_globals():
    core = getattr(np, "_core", None) or np.core
    scalar_dtypes = [type(np.dtype(kind)) for kind in (np.float64, np.float32, np.int64, np.int32, np.bool_)]
    return [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype, *scalar_dtypes]


def _checkpoint_globals():
    # fairseq-train's first rank reads the checkpoint and hands it to the others with torch.save/torch.load, its
    # tensors replaced by this placeholder: without it no run of several ranks could resume.
    from fairseq.distributed.utils import _TensorPlaceholder
    from omegaconf import DictConfig, ListConfig
    from omegaconf.base import Container, ContainerMetadata, Metadata, Node
    from omegaconf.nodes import AnyNode, ValueNode

    return [
        argparse.Namespace,
        collections.defaultdict,
        dict,
        list,
        int,
        float,
        str,
        bool,
        type(None),
        typing.Any,
        DictConfig,
        ListConfig,
        Container,
        ContainerMetadata,
        Metadata,
        Node,
        AnyNode,
        ValueNode,
        _TensorPlaceholder,
        *_numpy_globals(),
    ]


def allow_fairseq_checkpoints():
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:
        add_safe_globals(_checkpoint_globals())


def _unreadable(path):
    """Why ``path`` is not a complete torch checkpoint (a zip archive whose every member reads back), or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError) as error:
        return f"not a complete checkpoint archive: {error}" if os.path.getsize(path) else "the file is empty"
    return f"member {broken} is damaged" if broken else None


def _unreadable_checkpoint_error(path, reason):
    folder = os.path.dirname(os.path.abspath(path))
    others = sorted(name for name in os.listdir(folder)
                    if name.endswith(".pt") and name != os.path.basename(path) and not _unreadable(os.path.join(folder, name)))
    instead = (f"readable checkpoints beside it: {', '.join(others)}; resume from one with --restore-file "
               f"{os.path.join(folder, others[0])} (fairseq-generate: --path)" if others else
               "no readable checkpoint beside it")
    return AutoAssistConfigError(f"checkpoint {path} cannot be read ({reason}); {instead}, or move the file away "
                                 "to train afresh")


def explain_unreadable_checkpoints():
    """Wrap fairseq's ``load_checkpoint_to_cpu`` (used by fairseq-train's resume and by fairseq-generate) so
    that a checkpoint file that cannot be read ends the process with one line."""
    from fairseq import checkpoint_utils

    load = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(load, "explains_unreadable_files", False):
        return

    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return load(path, *args, **kwargs)
        except Exception:
            reason = _unreadable(path) if os.path.isfile(path) else None
            if reason is None:
                raise
            report_config_errors_in_one_line()
            raise _unreadable_checkpoint_error(path, reason) from None

    load_checkpoint_to_cpu.explains_unreadable_files = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu


def copy_checkpoints_atomically():
    """fairseq writes a checkpoint once and copies it onto ``checkpoint_last.pt`` (and ``checkpoint_best.pt``) in
    place, so a kill during the copy leaves a truncated file that the next resume cannot read. Wrap its copy so that
    a local one goes to ``DST.partial`` and is renamed over ``DST``: a kill leaves the old file or the new one."""
    from fairseq.file_io import PathManager

    copy = PathManager.copy
    if getattr(copy, "atomic", False):
        return

    def atomic_copy(src_path, dst_path, overwrite=False):
        if "://" in str(dst_path) or (os.path.exists(dst_path) and not overwrite):
            return copy(src_path, dst_path, overwrite)
        partial = f"{dst_path}.partial"
        shutil.copyfile(src_path, partial)
        os.replace(partial, dst_path)
        return True

    atomic_copy.atomic = True
    PathManager.copy = staticmethod(atomic_copy)
