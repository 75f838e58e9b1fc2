"""The shrinking batch stream (no fairseq import) and its fairseq iterator glue (``iterator``)."""

from .batch_stream import EpochSelectionStats, ShrinkingBatchStream

__all__ = ["EpochSelectionStats", "ShrinkingBatchStream"]
