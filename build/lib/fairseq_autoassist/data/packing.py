"""Which pairs share a batch, and what that does to an update (no fairseq import).

fairseq's ``batch_by_size`` walks a sorted list of pairs and closes a batch when its size times its longest
``max(source, target)`` length would pass ``--max-tokens``; the sort therefore decides which pairs train
together. Three sorts (``--autoassist-packing``):

* ``source-target``: fairseq's own order, by source length and then target length, as the stock translation
  task batches. Within one source length the target lengths run from short to long, so the pairs whose target
  length is unusual for their source (a truncated target, another sentence's target) end up side by side at
  the edges of each source length's run of batches.
* ``padded-length``: by the padded size ``max(source, target)``, fairseq's order breaking ties. A batch then
  holds pairs of one padded size, whatever the ratio of their sides.
* ``padded-length-shuffled``: by the padded size, ties in a seeded random order, so that within one padded size
  no order by source or target length remains to line up the pairs of unusual length ratio.

The criterion sums a batch's token losses and the trainer divides the gradient by the batch's target tokens,
so every update weighs each of its target tokens by one over the batch's tokens. ``update_weight_shares``
measures what a packing makes of that: the share of each update's loss that a set of pairs (the corrupted ones
of a noisy corpus, say) carries, averaged over the updates, against their share of all target tokens.
"""

import numpy as np

PACKINGS = ("padded-length", "padded-length-shuffled", "source-target")


def packing_key(packing, source_sizes, target_sizes, fairseq_rank, seed=0):
    """A sort key per dataset index for ``packing``: sorting a chunk by it gives that packing's order.

    ``fairseq_rank[i]`` is pair ``i``'s position in fairseq's order (source length, then target length, ties in
    a seeded random order), which breaks every remaining tie, so the key orders pairs totally; ``seed`` draws
    the random order of ``padded-length-shuffled``."""
    rank = np.asarray(fairseq_rank, dtype=np.int64)
    if packing == "source-target":
        return rank
    padded_size = np.maximum(source_sizes, target_sizes).astype(np.int64)
    if packing == "padded-length":
        return padded_size * len(rank) + rank
    if packing == "padded-length-shuffled":
        return padded_size * len(rank) + np.random.default_rng(seed).permutation(len(rank))
    raise ValueError(f"unknown packing {packing!r}; choose one of {', '.join(PACKINGS)}")


def update_weight_shares(batches, target_sizes, groups):
    """For each boolean mask of ``groups`` (name -> mask over dataset indices): the mean over ``batches`` of the
    share of the batch's target tokens that the group's pairs hold (the share of each update's loss they carry),
    their share of all target tokens and pairs, the share of batches that are mostly (over half their pairs) the
    group's, and the share of the group's pairs that sit in such batches."""
    target_sizes = np.asarray(target_sizes, dtype=np.float64)
    batch_tokens = np.array([target_sizes[batch].sum() for batch in batches])
    batch_pairs = np.array([len(batch) for batch in batches])
    all_pairs = np.concatenate(batches)
    shares = {}
    for name, mask in groups.items():
        mask = np.asarray(mask, dtype=bool)
        group_tokens = np.array([target_sizes[batch][mask[batch]].sum() for batch in batches])
        group_pairs = np.array([np.count_nonzero(mask[batch]) for batch in batches])
        mostly_group = group_pairs > 0.5 * batch_pairs
        shares[name] = {
            "update_weight_share": float(np.mean(group_tokens / np.maximum(batch_tokens, 1))),
            "token_share": float(group_tokens.sum() / max(batch_tokens.sum(), 1)),
            "pair_share": float(np.count_nonzero(mask[all_pairs]) / max(len(all_pairs), 1)),
            "mostly_group_batches": float(np.mean(mostly_group)),
            "pairs_in_mostly_group_batches": float(group_pairs[mostly_group].sum() / max(group_pairs.sum(), 1)),
        }
    return shares
