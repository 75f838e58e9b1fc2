"""Version shims: loading fairseq 0.12 checkpoints under torch >= 2.6.

torch 2.6 made ``torch.load`` default to ``weights_only=True``; fairseq 0.12 checkpoints hold an
``argparse.Namespace`` and omegaconf containers, so every resume and every ``fairseq-generate``
would fail with "Weights only load failed". fairseq imports ``--user-dir`` modules before it
loads a checkpoint, so allow-listing those classes here fixes both without an environment
variable. Checkpoints also hold numpy scalars (the best validation BLEU, for example), so numpy's
array reconstruction and scalar types are allowed too. AutoAssist's own checkpointed state is only
tensors, lists, dicts and Python scalars.
"""

import argparse
import collections
import typing

import numpy as np
import torch


def _numpy_globals():
    core = getattr(np, "_core", None) or np.core
    scalar_dtypes = [type(np.dtype(kind)) for kind in (np.float64, np.float32, np.int64, np.int32, np.bool_)]
    return [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype, *scalar_dtypes]


def _checkpoint_globals():
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
        *_numpy_globals(),
    ]


def allow_fairseq_checkpoints():
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:
        add_safe_globals(_checkpoint_globals())
