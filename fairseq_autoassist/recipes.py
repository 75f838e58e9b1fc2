"""What the scripts share: the training recipe, model sizes, an in-process trainer, prepared folders, logged
commands and a synthetic corpus (no fairseq import at module level).

``scripts/train_multi30k.py``, ``scripts/benchmark.py``, ``scripts/benchmark_overhead.py`` and the
tests build their ``fairseq-train`` arguments with ``recipe``; ``configs/multi30k.yaml`` is the same
recipe for ``fairseq-hydra-train`` (a test keeps the two equal).
"""

import ctypes
import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys

from .errors import AutoAssistConfigError

PLUGIN_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(PLUGIN_DIR)

# Model sizes with the learning rate, warm-up and batch tuned for each on Multi30K: "base" is the 3+3-layer,
# 256-wide Transformer of the main job (lr 1e-3 with 500 warm-up updates reached validation BLEU 33.7 after
# 8 epochs on 2 CPU cores, where lr 5e-4 with 400 reached test BLEU 22.5); "small" (2+2 x 128) trains about
# twice as fast on CPU and is the benchmarks' model (lr 2e-3, 300 warm-up updates, 2,048 tokens: validation
# BLEU 18.6 after 2 epochs, 27.1 after 4); "tiny" is for tests.
ARCHITECTURES = {
    "base": dict(layers=3, dim=256, ffn=1024, heads=4, lr=1e-3, warmup_updates=500, max_tokens=4096),
    "small": dict(layers=2, dim=128, ffn=512, heads=4, lr=2e-3, warmup_updates=300, max_tokens=2048),
    "tiny": dict(layers=1, dim=32, ffn=64, heads=2, lr=1e-3, warmup_updates=10, max_tokens=400),
}


# Validation decodes greedily and at most 1.2 x source length + 10 tokens: an untrained model otherwise
# writes up to 200 tokens per sentence (validating the first epoch took 3.5 minutes on 2 CPU cores).
VALIDATION_GENERATION = '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}'


def _task_args(policy):
    return ["--task", "translation"] if policy is None else [
        "--task", "autoassist_translation", "--autoassist-policy", policy]


def _transformer_args(size):
    """fairseq's ``transformer`` with the layers, width and heads of an ``ARCHITECTURES`` entry."""
    return ["--arch", "transformer",
            "--encoder-layers", str(size["layers"]), "--decoder-layers", str(size["layers"]),
            "--encoder-embed-dim", str(size["dim"]), "--decoder-embed-dim", str(size["dim"]),
            "--encoder-ffn-embed-dim", str(size["ffn"]), "--decoder-ffn-embed-dim", str(size["ffn"]),
            "--encoder-attention-heads", str(size["heads"]), "--decoder-attention-heads", str(size["heads"])]


def recipe(data, save_dir, policy, arch="base", max_epoch=10, max_update=0, max_tokens=None, lr=None,
           warmup_updates=None, seed=1, cpu=False, eval_bleu=True, log_interval=20, lr_scheduler="inverse_sqrt",
           dropout=0.3, warmup_init_lr=None):
    """fairseq-train arguments; ``policy=None`` gives fairseq's stock ``translation`` task (the
    baseline), any other value the AutoAssist task with that ``--autoassist-policy``. ``max_tokens``,
    ``lr`` and ``warmup_updates`` default to the architecture's tuned values.

    ``lr_scheduler``: ``inverse_sqrt`` (the recipe's), or ``cosine``, which after the same warm-up decays
    the learning rate to 0 exactly at ``max_update`` (a budget-matched baseline). ``warmup_init_lr``: the
    learning rate the warm-up starts from (None: fairseq's default).
    """
    size = ARCHITECTURES[arch]
    max_tokens = size["max_tokens"] if max_tokens is None else max_tokens
    lr = size["lr"] if lr is None else lr
    warmup_updates = size["warmup_updates"] if warmup_updates is None else warmup_updates
    args = [
        str(data),
        "--user-dir", PLUGIN_DIR,
        *_task_args(policy),
        *_transformer_args(size), "--share-all-embeddings",
        "--dropout", str(dropout), "--weight-decay", "0.0001",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
        "--lr", str(lr), "--lr-scheduler", lr_scheduler, "--warmup-updates", str(warmup_updates),
        "--max-tokens", str(max_tokens), "--seed", str(seed),
        "--max-epoch", str(max_epoch), "--max-update", str(max_update),
        "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--log-format", "simple", "--log-interval", str(log_interval),
        "--num-workers", "0",
    ]
    if warmup_init_lr is not None:
        args += ["--warmup-init-lr", str(warmup_init_lr)]
    if eval_bleu:
        args += [
            "--eval-bleu", "--eval-bleu-args", VALIDATION_GENERATION, "--eval-bleu-remove-bpe", "sentencepiece",
            "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        ]
    if cpu:
        args.append("--cpu")
    return args


# WMT14 En-De: fairseq's documented Transformer-base settings for this task (transformer_wmt_en_de: 6+6 x
# 512, dropout 0.1; Adam (0.9, 0.98), inverse_sqrt from 1e-7 over 4,000 warm-up updates, label smoothing 0.1,
# no weight decay) at about 25,000 target tokens per update as in Vaswani et al. and the AutoAssist paper
# (4,096 tokens x --update-freq 8 on one GPU; 8 GPUs with --update-freq 1 give the same batch), 100,000
# updates, fp16. Learning rate 7e-4 (fairseq's value for that batch; the paper used fairseq 0.6 with the
# same base model and data and does not list its own). "wmt-tiny" is the same recipe at test size on CPU.
WMT_SIZES = {"wmt": dict(arch="transformer_wmt_en_de", max_tokens=4096, update_freq=8, gpu=True),
             "wmt-tiny": dict(arch="tiny", max_tokens=1024, update_freq=1, gpu=False)}


def wmt_recipe(data, save_dir, policy, size="wmt", max_update=100000, seed=1, lr=7e-4, warmup_updates=4000):
    """fairseq-train arguments of the WMT14 recipe (``policy`` as in ``recipe``)."""
    spec = WMT_SIZES[size]
    model = _transformer_args(ARCHITECTURES[spec["arch"]]) if spec["arch"] in ARCHITECTURES else ["--arch", spec["arch"]]
    return [
        str(data), "--user-dir", PLUGIN_DIR, *_task_args(policy), *model, "--share-all-embeddings",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
        "--lr", str(lr), "--lr-scheduler", "inverse_sqrt", "--warmup-init-lr", "1e-07",
        "--warmup-updates", str(warmup_updates),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--weight-decay", "0.0",
        "--max-tokens", str(spec["max_tokens"]), "--update-freq", str(spec["update_freq"]),
        "--max-update", str(max_update), "--seed", str(seed), "--save-dir", str(save_dir),
        "--keep-last-epochs", "5", "--log-format", "simple", "--log-interval", "100", "--num-workers", "0",
    ] + (["--fp16"] if spec["gpu"] else ["--cpu"])


def build_trainer(argv):
    """fairseq's task, Trainer and first epoch's training iterator for the ``fairseq-train`` arguments ``argv``,
    in this process (for the scripts that time updates or inspect batches without a training run)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    # The task must be registered before fairseq builds its parser (fairseq-train does this for --user-dir).
    from .tasks import autoassist_translation  # noqa: F401

    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    return task, trainer, trainer.get_train_iterator(epoch=1, load_dataset=False)


def require_prepared(data):
    """The ``prepare.json`` of a folder written by ``scripts/prepare_multi30k.py``, or an error that
    says how to get one."""
    info_path = os.path.join(str(data or ""), "prepare.json")
    if not os.path.isfile(info_path):
        raise AutoAssistConfigError(
            f"{data} is not a prepared data-bin folder (no prepare.json); "
            "run scripts/prepare_multi30k.py or pass --data"
        )
    with open(info_path) as f:
        return json.load(f)


def data_languages(data, source=None, target=None):
    """``{"source", "target"}`` of a prepared data-bin folder: the languages given, else those its prepare.json
    records (every report says which it read)."""
    info = require_prepared(data) if source is None or target is None else {}
    return {"source": source or info["source"], "target": target or info["target"]}


def prepared_test_sets(info):
    """``{fairseq split: test set name}`` of a folder whose prepare.json is ``info`` (a folder that records none has
    one test split, ``test``)."""
    return info.get("test_sets", {"test": "test"})


def split_named(info, name):
    """The fairseq split that ``name`` means in a folder whose prepare.json is ``info``: ``name`` itself when it is
    one of the folder's splits (``valid`` or a key of ``test_sets``), else the split of the test set so named. A
    split wins because a corpus may name its own test sets like fairseq's splits (TVsub's ``test`` is ``test1``)."""
    test_sets = prepared_test_sets(info)
    if name == "valid" or name in test_sets:
        return name
    return {test_set: split for split, test_set in test_sets.items()}.get(name, name)


def reported_test_set_name(split, name):
    """What a report calls the test set ``name`` held in fairseq split ``split``: its own name, unless that reads as
    a fairseq split (TVsub names its own test and tuning sets ``test`` and ``valid``), then the split's."""
    return split if name in ("train", "valid") or re.fullmatch(r"test\d*", name) else name


def write_atomically(path, text):
    """Writes ``text`` to ``path`` so that a kill at any moment leaves the old file or the new one."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)


def write_report(out, stem, record, table):
    """A report script's two outputs, each written atomically: ``OUT/STEM.json`` (``record``, every figure) and
    ``OUT/STEM.md`` (``table``); returns the table's path."""
    os.makedirs(out, exist_ok=True)
    write_atomically(os.path.join(out, f"{stem}.json"), json.dumps(record, indent=1))
    path = os.path.join(out, f"{stem}.md")
    write_atomically(path, table)
    return path


# glibc's allocator hands large freed blocks back to the kernel (mmap) and trims the heap's top above 128 KiB, so
# every training step faults its activations in afresh: with the small model on CPU a quarter of the process's
# time went to the kernel (11.5M minor faults in 150 updates). Allocating from the heap only and keeping freed
# memory for reuse leaves 0.3M faults and cuts the time per update by about a quarter, losses unchanged to the
# last digit, for 20% more peak resident memory (docs/results/overhead.md). A value in the environment wins.
TRAINING_MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
                       "MALLOC_TOP_PAD_": str(256 << 20)}


def training_environment():
    """This process's environment with ``TRAINING_MALLOC_ENV`` added where it sets none of its own."""
    return {**TRAINING_MALLOC_ENV, **os.environ}


def reexec_under_training_malloc():
    """Restarts this script under ``training_environment()`` (glibc reads it once, at start-up) unless it already
    runs under it, so that an in-process timing measures what the training runs do."""
    if any(key not in os.environ for key in TRAINING_MALLOC_ENV):
        os.execve(sys.executable, [sys.executable] + sys.argv, training_environment())


# The line run_logged ends a command's log with: the peak resident memory of its process (logs.parse_peak_memory).
PEAK_MEMORY_LINE = "# peak resident memory: {:.0f} MB"


def run_logged(command, log_path, echo=False):
    """Runs ``command`` with its output appended to ``log_path`` (after a ``# command`` line) and, when
    ``echo``, to stdout too, under ``training_environment()``, then ``PEAK_MEMORY_LINE`` (the peak as of the command's
    last line of output); returns the exit code."""
    with open(log_path, "a") as log:
        log.write("# " + " ".join(command) + "\n")
        log.flush()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=training_environment(), preexec_fn=_die_with_parent)
        peak_kib = None
        for line in process.stdout:
            if echo:
                sys.stdout.write(line)
            log.write(line)
            log.flush()
            peak_kib = _peak_resident_kib(process.pid) or peak_kib  # a high-water mark: the last reading is the peak
        if peak_kib is not None:
            log.write(PEAK_MEMORY_LINE.format(peak_kib / 1024) + "\n")
    return process.wait()


_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """Run in the child before its program starts: Linux kills it when the process that launched it dies, so that a
    benchmark killed alone (its trainers run for hours) never leaves an orphaned trainer writing to its run folder."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _peak_resident_kib(pid):
    """The high-water mark of ``pid``'s resident memory since it started its program (Linux's ``VmHWM``), or None.

    Read while the process runs: once it has exited, only getrusage's ``ru_maxrss`` is left, which on Linux also
    counts the launching process' memory copied into the child before its program started."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), None)
    except (OSError, ValueError):
        return None


SYNTHETIC_SPLIT_SIZES = {"train": 400, "val": 40, "test_2016_flickr": 40, "test_2017_flickr": 30}


def write_synthetic_multi30k(raw_dir, seed=0):
    """Multi30K-shaped raw files: a word-for-word 'translation' with reordering, train gzipped
    (for tests and the benchmark's smoke preset)."""
    rng = random.Random(seed)
    source_words = [f"wort{i}" for i in range(60)]
    target_words = {w: f"word{i}" for i, w in enumerate(source_words)}
    os.makedirs(raw_dir, exist_ok=True)
    for stem, size in SYNTHETIC_SPLIT_SIZES.items():
        pairs = []
        for _ in range(size):
            sentence = [rng.choice(source_words) for _ in range(rng.randint(3, 12))]
            pairs.append((" ".join(sentence), " ".join(target_words[w] for w in reversed(sentence))))
        for lang, column in (("de", 0), ("en", 1)):
            text = "".join(pair[column] + "\n" for pair in pairs).encode("utf-8")
            if stem == "train":
                with gzip.open(os.path.join(raw_dir, f"{stem}.{lang}.gz"), "wb") as f:
                    f.write(text)
            else:
                with open(os.path.join(raw_dir, f"{stem}.{lang}"), "wb") as f:
                    f.write(text)
    return raw_dir
