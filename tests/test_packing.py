"""Packing: which pairs share a batch, what that does to each update, and the real batches of each packing
against the stock task's."""

import json

import numpy as np
import pytest

from fairseq_autoassist.benchmark.arms import PACKING_ARMS
from fairseq_autoassist.data.packing import packing_key, update_weight_shares
from fairseq_autoassist.recipes import build_trainer, recipe

from .conftest import run_script

# Pairs 0-3 have a target as long as their source; pairs 4-5 a truncated one (the corrupted pairs).
SOURCE = np.array([6, 6, 6, 6, 6, 6])
TARGET = np.array([6, 6, 6, 6, 2, 2])


def sorted_by(packing, indices, source=SOURCE, target=TARGET):
    fairseq_rank = np.lexsort((target, source))  # fairseq's order: source length, then target length
    rank = np.empty(len(source), dtype=np.int64)
    rank[fairseq_rank] = np.arange(len(source))
    key = packing_key(packing, source, target, rank)
    return indices[np.argsort(key[indices], kind="stable")]


def test_source_target_packing_is_fairseqs_order_and_padded_length_sorts_by_the_longer_side():
    source, target = np.array([3, 5, 5, 2]), np.array([9, 1, 4, 2])
    everything = np.arange(4)
    assert sorted_by("source-target", everything, source, target).tolist() == [3, 0, 1, 2]
    assert sorted_by("padded-length", everything, source, target).tolist() == [3, 1, 2, 0]
    with pytest.raises(ValueError, match="padded-length, padded-length-shuffled, source-target"):
        packing_key("by-colour", source, target, everything)


def test_the_shuffled_packing_orders_one_padded_size_at_random_by_its_seed():
    source, target = np.full(200, 8), np.arange(200) % 8 + 1  # one padded size, targets of every length
    rank = np.arange(200)  # fairseq's order: by target length here
    orders = {seed: np.argsort(packing_key("padded-length-shuffled", source, target, rank, seed)) for seed in (1, 2)}
    assert orders[1].tolist() == np.argsort(packing_key("padded-length-shuffled", source, target, rank, 1)).tolist()
    assert orders[1].tolist() != orders[2].tolist()
    # No trace of the target-length order: the first half holds short and long targets alike.
    assert abs(np.mean(target[orders[1][:100]]) - np.mean(target)) < 0.5
    longer = np.maximum(source, target) + np.arange(200) % 2
    assert (np.diff(longer[np.argsort(packing_key("padded-length-shuffled", source, longer, rank, 1))]) >= 0).all()


def test_a_batch_of_corrupted_pairs_carries_more_of_its_update_than_their_token_share():
    # Stock sorting puts the two truncated pairs side by side: one update of 4 target tokens is all theirs.
    stock = [np.array([4, 5]), np.array([0, 1]), np.array([2, 3])]
    mixed = [np.array([0, 4]), np.array([1, 5]), np.array([2, 3])]
    corrupted = np.isin(np.arange(6), [4, 5])
    stock_shares = update_weight_shares(stock, TARGET, {"corrupted": corrupted})["corrupted"]
    mixed_shares = update_weight_shares(mixed, TARGET, {"corrupted": corrupted})["corrupted"]
    assert stock_shares["token_share"] == mixed_shares["token_share"] == pytest.approx(4 / 28)
    assert stock_shares["update_weight_share"] == pytest.approx(1 / 3)
    assert mixed_shares["update_weight_share"] == pytest.approx((2 / 8 + 2 / 8 + 0) / 3)
    assert stock_shares["mostly_group_batches"] == pytest.approx(1 / 3) and mixed_shares["mostly_group_batches"] == 0
    assert stock_shares["pair_share"] == pytest.approx(2 / 6)
    assert stock_shares["pairs_in_mostly_group_batches"] == 1.0 and mixed_shares["pairs_in_mostly_group_batches"] == 0


def test_the_stock_sort_puts_truncated_pairs_in_batches_of_their_own_and_mixing_within_a_padded_length_does_not():
    """The mechanism the packing benchmark found (docs/results/packing/): cut by fairseq's own batch_by_size, the
    stock order lines up a source length's truncated targets into batches of their own; sorting by padded length
    in fairseq's tie order still does; ordering the pairs of one padded length at random leaves none."""
    from fairseq.data.data_utils import batch_by_size

    rng = np.random.default_rng(0)
    source = rng.integers(8, 14, size=3000)  # six source lengths, about 500 pairs each
    corrupted = rng.random(3000) < 0.3
    target = np.where(corrupted, source // 2, source + rng.integers(-1, 2, size=3000))
    fairseq_order = np.lexsort((rng.permutation(3000), target, source))
    rank = np.empty(3000, dtype=np.int64)
    rank[fairseq_order] = np.arange(3000)

    def shares(packing):
        order = np.argsort(packing_key(packing, source, target, rank, seed=1), kind="stable")
        batches = batch_by_size(order, lambda i: max(source[i], target[i]), max_tokens=400)
        return update_weight_shares(batches, target, {"corrupted": corrupted})["corrupted"]

    stock, padded, mixed = shares("source-target"), shares("padded-length"), shares("padded-length-shuffled")
    for grouped in (stock, padded):
        assert grouped["mostly_group_batches"] > 0.15 and grouped["pairs_in_mostly_group_batches"] > 0.5
        assert grouped["update_weight_share"] > grouped["token_share"] + 0.03
    assert mixed["mostly_group_batches"] == 0
    assert mixed["update_weight_share"] == pytest.approx(mixed["token_share"], abs=0.01)


@pytest.fixture(scope="module")
def noisy_data(raw_corpus, tmp_path_factory):
    """The synthetic corpus with 30% of its training pairs corrupted (truncated, misaligned, ...): target lengths
    that vary within one source length, as in a web-mined corpus."""
    folder = tmp_path_factory.mktemp("noisy")
    run_script("scripts/research/make_noisy_corpus.py", "--raw-dir", raw_corpus, "--out", str(folder / "raw"))
    run_script("scripts/prepare_multi30k.py", "--raw-dir", str(folder / "raw"), "--dest", str(folder / "data-bin"),
               "--vocab-size", "120", "--workers", "1", "--no-download")
    return str(folder / "data-bin")


def first_passes(data, tmp_path, policy, *extra, passes=1):
    """The batches (each sorted, in sorted order) of the first ``passes`` passes of a training run's iterator."""
    argv = recipe(data, str(tmp_path), policy, arch="tiny", max_tokens=400, cpu=True, eval_bleu=False) + list(extra)
    task, _, iterator = build_trainer(argv)
    if policy is None:
        return [sorted(sorted(batch.tolist()) for batch in iterator.frozen_batches)] * passes
    stream = task.runtime.stream
    return [sorted(sorted(batch.tolist()) for batch, _ in stream.iterate_epoch(epoch)) for epoch in range(1, passes + 1)]


def first_pass(data, tmp_path, policy, *extra):
    return first_passes(data, tmp_path, policy, *extra)[0]


@pytest.mark.slow
def test_the_plugins_stock_sort_over_a_whole_pass_gives_exactly_the_stock_batches(noisy_data, tmp_path):
    stock = first_pass(noisy_data, tmp_path, None)
    once_per_pass = ["--autoassist-refresh-updates", "0"]
    assert first_pass(noisy_data, tmp_path, "keep-all", "--autoassist-packing", "source-target", *once_per_pass) == stock
    # The padded-length packing, and the stock sort within chunks, cut other batches of the same pairs.
    padded = first_pass(noisy_data, tmp_path, "keep-all", *once_per_pass)
    chunked = first_pass(noisy_data, tmp_path, "keep-all", "--autoassist-packing", "source-target",
                         "--autoassist-refresh-updates", "2")
    for batches in (padded, chunked):
        assert batches != stock
        assert sorted(pair for batch in batches for pair in batch) == sorted(pair for batch in stock for pair in batch)
    # Selecting once per pass keeps the batches of the first pass; chunks cut new ones every pass.
    fixed = first_passes(noisy_data, tmp_path, "keep-all", *once_per_pass, passes=2)
    rebuilt = first_passes(noisy_data, tmp_path, "keep-all", "--autoassist-refresh-updates", "2", passes=2)
    assert fixed[0] == fixed[1]
    assert rebuilt[0] != rebuilt[1]


@pytest.mark.slow
def test_the_packing_report_measures_each_arms_batches_and_noise(noisy_data, tmp_path):
    run_script("scripts/research/packing_report.py", "--data", noisy_data, "--out", str(tmp_path), "--preset", "smoke")
    with open(tmp_path / "packing.json") as f:
        arms = json.load(f)["arms"]
    assert list(arms) == PACKING_ARMS
    # The same batches in another order: the same figures, up to the order of a floating-point sum.
    stock, through_plugin = arms["baseline"], arms["keep-all-stock-batches"]
    assert {k: v for k, v in stock.items() if k != "groups"} == {k: v for k, v in through_plugin.items() if k != "groups"}
    for group, shares in stock["groups"].items():
        assert through_plugin["groups"][group] == pytest.approx(shares)
    # The report counts the corrupted pairs that noise.tsv lists among the training pairs, in every arm alike.
    with open(f"{noisy_data}/noise.tsv") as f:
        listed = sum(1 for line in f if line.strip()) - 1  # a header line, then one line per corrupted pair
    with open(f"{noisy_data}/prepare.json") as f:
        training_pairs = json.load(f)["pairs"]["train"]
    for arm in arms.values():
        assert arm["groups"]["corrupted"]["pair_share"] == pytest.approx(listed / training_pairs)
    assert set(arms["keep-all"]["groups"]) == {"corrupted", "clean", "misaligned", "truncated", "duplicate",
                                                "untranslated", "wrong_language"}
    assert "| share of target tokens |" in (tmp_path / "packing.md").read_text()


@pytest.mark.slow
def test_the_packing_candidates_cut_the_stock_and_default_batches_as_training_does(noisy_data, tmp_path):
    """Over a whole pass the candidates script's stock sort is the stock task's batches, and its default packing the
    plugin's: what the script measures of a candidate is what training would cut."""
    run_script("scripts/research/packing_candidates.py", "--data", noisy_data, "--out", str(tmp_path), "--preset",
               "smoke", "--refresh-updates", "0")
    with open(tmp_path / "packing_candidates.json") as f:
        results = json.load(f)["results"]
    stock, default = results["stock task (whole corpus)"], results["padded-length"]
    assert stock["batches"] == len(first_pass(noisy_data, tmp_path / "stock", None))
    assert results["source-target"]["positions_ratio_to_stock"] == 1.0
    plugin = first_pass(noisy_data, tmp_path / "plugin", "keep-all", "--autoassist-refresh-updates", "0")
    assert default["batches"] == len(plugin)
    assert set(results["padded-length"]["groups"]) >= {"corrupted", "clean"}
    # Issue 63's bounds on this fixed tiny corpus: the plugin's packings compute no more positions per target token
    # than the stock task (1.01 at most), and ordering one padded size at random leaves no update mostly corrupted,
    # where the stock sort leaves 14%. On the real corpora, cut chunk by chunk, they cost 1.03-1.09
    # (docs/results/mixing/).
    for packing in ("padded-length", "padded-length-shuffled"):
        assert results[packing]["positions_ratio_to_stock"] <= 1.01
    assert results["padded-length-shuffled"]["groups"]["corrupted"]["mostly_group_batches"] == 0
    assert stock["groups"]["corrupted"]["mostly_group_batches"] > 0.1
