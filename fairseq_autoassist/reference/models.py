"""``autoassist-reference``: a reference model's loss for every training pair, by one of two recipes, with its cost.

    autoassist-reference --data data-bin/tatoeba.de-en --recipe two-halves --max-update 900
    autoassist-reference --data data-bin/multi30k-noisy30.de-en --recipe trusted \\
        --trusted ../shared/data/multi30k/val.de.gz ../shared/data/multi30k/val.en.gz --max-update 400

* ``two-halves`` (RHO-LOSS's variant without a holdout set): the training pairs split in two by source sentence
  (every pair of one source sentence in one half, ``--seed``), a small stock model trained on each half for
  ``--max-update`` updates (cosine to zero at that budget), each scoring the pairs of the other half: no pair is
  scored by a model that saw it.
* ``trusted``: one small stock model trained on a clean corpus the user names (``--trusted SRC_FILE TGT_FILE``,
  encoded with the data folder's own sentencepiece model and dictionary), scoring every training pair.

The models train with the project's recipe (``recipes.recipe``, ``--arch``, default ``small``) in
``DATA/reference/RECIPE/``, and the scores go to ``DATA/scores/RECIPE.npy`` (``autoassist-score``'s format: float32
per pair, NaN where unscored), with ``RECIPE.json`` beside it: the cost, which every benchmark table adds to the
arm that uses the scores (the target tokens each model trained on, the updates, the training and scoring seconds of
this machine), and the settings. A kill resumes: each model saves a checkpoint every quarter of its budget and
resumes from its last one, a model that reached the budget is not trained again, and the scoring resumes where it
stopped.
"""

import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np

from ..benchmark.logs import parse_epochs
from ..commands import command_parser
from ..corpus.raw_corpus import (NOISE_LIST, SCORES_FOLDER, PreparationError, check_side_by_side, exit_code, read_lines,
                         read_noise, write_noise)
from ..recipes import ARCHITECTURES, data_languages, recipe, require_prepared, run_logged, write_atomically
from .scores import score_split

logger = logging.getLogger("autoassist-reference")

RECIPES = ("two-halves", "trusted")
REFERENCE_FOLDER = "reference"


def languages(data):
    found = data_languages(data)
    return found["source"], found["target"]


def load_split(data, split, lang):
    """The binarized ``split`` of ``data`` on the side ``lang`` (fairseq's indexed dataset) and its dictionary."""
    from fairseq.data import Dictionary, data_utils

    src, tgt = languages(data)
    dictionary = Dictionary.load(os.path.join(data, f"dict.{lang}.txt"))
    dataset = data_utils.load_indexed_dataset(os.path.join(data, f"{split}.{src}-{tgt}.{lang}"), dictionary)
    if dataset is None:
        raise PreparationError(f"{data} has no binarized {split} split for {lang}; prepare it with autoassist-prepare")
    return dataset, dictionary


def halves_by_source(data, seed):
    """Half 0 or 1 of every training pair: identical source sentences in one half, the halves drawn at random."""
    src, _ = languages(data)
    source, _ = load_split(data, "train", src)
    groups = {}
    keys = np.empty(len(source), dtype=np.int64)
    for index in range(len(source)):
        keys[index] = groups.setdefault(source[index].numpy().tobytes(), len(groups))
    side = np.random.default_rng(seed).integers(0, 2, size=len(groups))
    return side[keys].astype(np.int8)


def write_subset(data, indices, dest, extra=None):
    """A data folder ``dest`` whose training pairs are ``indices`` of ``data``'s (copied from its binaries: the
    same pieces, the same dictionary) and whose other splits, dictionaries and sentencepiece model are ``data``'s;
    ``extra``: more for its prepare.json, which is returned."""
    from fairseq.data import indexed_dataset

    src, tgt = languages(data)
    os.makedirs(dest, exist_ok=True)
    for lang in (src, tgt):
        dataset, dictionary = load_split(data, "train", lang)
        prefix = os.path.join(dest, f"train.{src}-{tgt}.{lang}")
        builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=len(dictionary))
        for index in indices:
            builder.add_item(dataset[int(index)])
        builder.finalize(prefix + ".idx")
    for name in os.listdir(data):
        path = os.path.join(data, name)
        if os.path.isfile(path) and not name.startswith("train.") and name not in ("prepare.json", NOISE_LIST):
            shutil.copyfile(path, os.path.join(dest, name))
    if os.path.isdir(os.path.join(data, "raw")):
        shutil.copytree(os.path.join(data, "raw"), os.path.join(dest, "raw"), dirs_exist_ok=True)
    info = dict(require_prepared(data))
    info.pop("clean_only", None)
    info.update(subset_of=os.path.abspath(data), pairs={**info.get("pairs", {}), "train": len(indices)},
                **(extra or {}))
    noise_path = os.path.join(data, NOISE_LIST)
    if os.path.isfile(noise_path):
        # The corrupted pairs' list follows them to their new dataset indices.
        new_index = {int(old): new for new, old in enumerate(indices)}
        write_noise(os.path.join(dest, NOISE_LIST),
                    {new_index[line]: kind for line, kind in read_noise(noise_path).items() if line in new_index})
    write_atomically(os.path.join(dest, "prepare.json"), json.dumps(info, indent=2))
    return info


def encode_trusted(data, paths, dest):
    """The trusted corpus ``paths`` (source file, target file) as a data folder ``dest`` in ``data``'s pieces and
    dictionary, with ``data``'s validation split."""
    import sentencepiece as spm

    src, tgt = languages(data)
    sides = check_side_by_side(paths, [read_lines(path) for path in paths])
    model = spm.SentencePieceProcessor(model_file=os.path.join(data, "spm.model"))
    work = os.path.join(dest, "pieces")
    os.makedirs(work, exist_ok=True)
    for lang, lines in zip((src, tgt), sides):
        with open(os.path.join(work, f"train.{lang}"), "w", encoding="utf-8") as f:
            f.writelines(" ".join(model.encode(line, out_type=str)) + "\n" for line in lines)
    command = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", src, "--target-lang", tgt,
               "--trainpref", os.path.join(work, "train"), "--destdir", dest,
               "--srcdict", os.path.join(data, f"dict.{src}.txt"), "--tgtdict", os.path.join(data, f"dict.{tgt}.txt"),
               "--workers", "1"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    shutil.rmtree(work)
    for name in os.listdir(data):
        if name.startswith("valid.") or name in ("spm.model", "spm.vocab"):
            shutil.copyfile(os.path.join(data, name), os.path.join(dest, name))
    info = dict(require_prepared(data))
    info.update(trusted=[os.path.abspath(path) for path in paths], pairs={"train": len(sides[0])})
    write_atomically(os.path.join(dest, "prepare.json"), json.dumps(info, indent=2))
    return len(sides[0])


def reference_warmup(arch, max_update):
    """The reference models' warm-up: the architecture's, but at most a quarter of their budget (a budget shorter
    than the warm-up would never reach the peak learning rate)."""
    return min(ARCHITECTURES[arch]["warmup_updates"], max(1, max_update // 4))


def model_folder(folder, src, tgt):
    """Where the reference model ``src`` -> ``tgt`` trained on ``folder`` (a half, or the trusted corpus) is saved."""
    return os.path.join(folder, f"checkpoints-{src}-{tgt}")


def train_reference(folder, save_dir, arch, max_update, seed, src, tgt):
    """Trains (or finds trained) a stock model ``src`` -> ``tgt`` on ``folder`` to ``max_update`` updates; returns
    its checkpoint and cost: the updates and the target tokens it trained on, and its training seconds. A checkpoint
    every quarter of the budget (fairseq validates there too): on a large corpus one budget is often within a
    single epoch, whose end would be the only checkpoint, so a kill would lose the whole model (an hour on TVsub)."""
    checkpoint = os.path.join(save_dir, "checkpoint_last.pt")
    log_path = os.path.join(save_dir, "train.log")
    args = recipe(folder, save_dir, None, arch=arch, max_update=max_update, max_epoch=0, seed=seed, cpu=True,
                  eval_bleu=False, lr_scheduler="cosine", warmup_updates=reference_warmup(arch, max_update))
    command = [sys.executable, "-m", "fairseq_cli.train", *args, "--source-lang", src, "--target-lang", tgt,
               "--no-progress-bar", "--no-epoch-checkpoints", "--validate-interval-updates", str(max_update),
               "--save-interval-updates", str(max(1, max_update // 4)), "--keep-interval-updates", "1"]
    if not _trained_to(log_path, max_update):
        os.makedirs(save_dir, exist_ok=True)
        logger.info("training the reference model on %s for %d updates: %s", folder, max_update, save_dir)
        if run_logged(command, log_path) != 0:
            raise PreparationError(f"training the reference model failed; see {log_path}")
    epochs = parse_epochs(open(log_path, encoding="utf-8").read())
    last = epochs[-1]
    return checkpoint, {"updates": int(last["updates"]), "target_tokens": int(last["target_tokens"]),
                        "train_seconds": round(last["train_seconds"], 1)}


def _trained_to(log_path, max_update):
    if not os.path.isfile(log_path):
        return False
    epochs = parse_epochs(open(log_path, encoding="utf-8").read())
    return bool(epochs) and epochs[-1]["updates"] >= max_update


def check_settings(work, output, settings, direction):
    """Records the settings of the models of ``direction`` in ``work`` on the first run; refuses to resume under
    other settings (the checkpoints and the scores already written would be the old settings')."""
    path = os.path.join(work, f"settings-{direction}.json")
    if os.path.isfile(path):
        with open(path) as f:
            recorded = json.load(f)
        changed = {key: (recorded.get(key), value) for key, value in settings.items() if recorded.get(key) != value}
        if changed:
            described = ", ".join(f"{key} {old} (now {new})" for key, (old, new) in changed.items())
            stem = os.path.splitext(output)[0]
            raise PreparationError(f"{work} holds reference models of {direction} built with {described}; remove "
                                   f"{work} and {stem}.npy / {stem}.json to build them anew, or repeat the settings")
        return
    os.makedirs(work, exist_ok=True)
    write_atomically(path, json.dumps(settings, indent=2))


def scoring_cost(work, direction, model, scored):
    """The seconds and pairs ``model`` has scored over every run of the command (``scored``: this run's, from
    ``score_split``), kept in ``work/scoring-DIRECTION.json``: a resumed run adds to them, and a run that finds
    every pair scored reports the earlier runs' seconds rather than none."""
    path = os.path.join(work, f"scoring-{direction}.json")
    totals = {}
    if os.path.isfile(path):
        with open(path) as f:
            totals = json.load(f)
    before = totals.get(model, {"score_seconds": 0.0, "scored_pairs": 0})
    totals[model] = {"score_seconds": round(before["score_seconds"] + scored["seconds_this_run"], 2),
                     "scored_pairs": before["scored_pairs"] + scored["scored_this_run"]}
    write_atomically(path, json.dumps(totals, indent=2))
    return totals[model]


def scores_name(recipe_name, reverse=False):
    """The stem of a recipe's scores in ``DATA/scores/``: ``RECIPE``, or ``RECIPE-reverse`` for the models that
    translate the target side into the source side (dual cross-entropy's backward direction)."""
    return f"{recipe_name}-reverse" if reverse else recipe_name


def build_reference(data, recipe_name, max_update, arch="small", seed=1, trusted=None, max_tokens=8192,
                    reverse=False):
    """Runs ``recipe_name`` on ``data`` (``reverse``: with models from the target side to the source side);
    returns what ``DATA/scores/RECIPE[-reverse].json`` says."""
    require_prepared(data)
    if recipe_name == "trusted" and not trusted:
        raise PreparationError("--recipe trusted needs --trusted SRC_FILE TGT_FILE, a clean corpus")
    src, tgt = languages(data)
    if reverse:
        src, tgt = tgt, src
    direction = f"{src}-{tgt}"
    name = scores_name(recipe_name, reverse)
    work = os.path.join(data, REFERENCE_FOLDER, recipe_name)
    output = os.path.join(data, SCORES_FOLDER, f"{name}.npy")
    check_settings(work, output, {"max_update": max_update, "arch": arch, "seed": seed,
                                  "trusted": [os.path.abspath(path) for path in trusted or []]}, direction)
    models = []
    if recipe_name == "two-halves":
        half = halves_by_source(data, seed)
        for side in (0, 1):
            folder = os.path.join(work, f"half{side}")
            if not os.path.isfile(os.path.join(folder, "prepare.json")):
                write_subset(data, np.flatnonzero(half == side), folder)
            checkpoint, cost = train_reference(folder, model_folder(folder, src, tgt), arch, max_update, seed, src,
                                               tgt)
            # The model of one half scores the other.
            scored = score_split(checkpoint, data, output=output, max_tokens=max_tokens,
                                 only=np.flatnonzero(half != side))
            models.append({"trained_on": f"half {side}", "pairs": int(np.count_nonzero(half == side)), **cost,
                           **scoring_cost(work, direction, f"half {side}", scored)})
    else:
        folder = os.path.join(work, "corpus")
        pairs = encode_trusted(data, trusted, folder)
        checkpoint, cost = train_reference(folder, model_folder(folder, src, tgt), arch, max_update, seed, src, tgt)
        scored = score_split(checkpoint, data, output=output, max_tokens=max_tokens)
        models.append({"trained_on": "trusted", "pairs": pairs, **cost,
                       **scoring_cost(work, direction, "trusted", scored)})
    scores = np.load(output, mmap_mode="r")
    info = {"recipe": recipe_name, "direction": direction, "data": os.path.abspath(data), "arch": arch,
            "max_update": max_update, "warmup_updates": reference_warmup(arch, max_update), "seed": seed,
            "trusted": [os.path.abspath(path) for path in trusted or []], "models": models,
            "scores": os.path.abspath(output), "scored": int(np.count_nonzero(~np.isnan(scores))),
            "pairs": int(len(scores)),
            "cost": {"target_tokens": sum(model["target_tokens"] for model in models),
                     "updates": sum(model["updates"] for model in models),
                     "train_seconds": round(sum(model["train_seconds"] for model in models), 1),
                     "score_seconds": round(sum(model["score_seconds"] for model in models), 1)}}
    write_atomically(os.path.join(data, SCORES_FOLDER, f"{name}.json"), json.dumps(info, indent=2))
    logger.info("reference scores of %s: %s (cost: %s)", data, output, info["cost"])
    return info


def main(argv=None):
    parser = command_parser("autoassist-reference", __doc__)
    parser.add_argument("--data", required=True, help="the prepared data folder whose training pairs to score")
    parser.add_argument("--recipe", choices=RECIPES, required=True, help="two-halves or trusted (above)")
    parser.add_argument("--max-update", type=int, required=True, help="updates each reference model trains for")
    parser.add_argument("--arch", default="small", choices=sorted(ARCHITECTURES),
                        help="the recipe's model size (default small, the benchmark presets')")
    parser.add_argument("--seed", type=int, default=1, help="seed of the halves and of the training (default 1)")
    parser.add_argument("--trusted", nargs=2, metavar=("SRC_FILE", "TGT_FILE"),
                        help="the clean corpus of --recipe trusted, two line-aligned files (plain or gzipped)")
    parser.add_argument("--max-tokens", type=int, default=8192, help="tokens per scoring batch (default 8192)")
    parser.add_argument("--reverse", action="store_true",
                        help="models from the target side to the source side, scores in RECIPE-reverse.npy: the "
                        "backward direction of autoassist-filter --dual-xent")
    args = parser.parse_args(argv)
    if args.max_update < 1:
        parser.error(f"--max-update {args.max_update}: give the reference models a positive budget")
    return exit_code(lambda: build_reference(args.data, args.recipe, args.max_update, args.arch, args.seed,
                                             args.trusted, args.max_tokens, args.reverse), logger)


if __name__ == "__main__":
    sys.exit(main())
