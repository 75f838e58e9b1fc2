"""The Assistant and its features: plain numpy/torch, no fairseq import."""

from .features import CorpusSide, PairFeatures
from .model import Assistant, AssistantConfig

__all__ = ["Assistant", "AssistantConfig", "CorpusSide", "PairFeatures"]
