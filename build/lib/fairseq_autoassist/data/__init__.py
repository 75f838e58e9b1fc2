"""The shrinking batch stream and data folder checks (no fairseq import), and the fairseq iterator
glue (``iterator``: corpus access, training order and batching, the epoch iterator)."""

from .batch_stream import EpochSelectionStats, ShrinkingBatchStream

__all__ = ["EpochSelectionStats", "ShrinkingBatchStream"]
