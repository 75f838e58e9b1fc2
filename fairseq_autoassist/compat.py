"""Version shims: loading fairseq 0.12 checkpoints under torch >= 2.6.

torch 2.6 made ``torch.load`` default to ``weights_only=True``; fairseq 0.12 checkpoints hold an
``argparse.Namespace`` and omegaconf containers, so every resume and every ``fairseq-generate``
would fail with "Weights only load failed". fairseq imports ``--user-dir`` modules before it
loads a checkpoint, so allow-listing those classes here fixes both without an environment
variable. AutoAssist's own checkpointed state is only tensors, lists, dicts and scalars.
"""

import argparse
import collections
import typing

import torch


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
    ]


def allow_fairseq_checkpoints():
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:
        add_safe_globals(_checkpoint_globals())
