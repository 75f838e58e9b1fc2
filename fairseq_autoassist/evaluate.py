"""Translate a split with a checkpoint and score it with sacreBLEU (BLEU and chrF, with signatures).

    autoassist-evaluate --checkpoint checkpoints/assistant/checkpoint_best.pt \
        --data data-bin/multi30k.de-en --split test --beam 5

Runs ``fairseq-generate`` (with this plugin loaded), decodes the sentencepiece pieces with the
``spm.model`` kept beside the binarized data, scores the detokenized hypotheses against the raw
references in ``DATA/raw/`` and writes a JSON file (default: ``bleu_SPLIT.json`` beside the
checkpoint) with the scores, their signatures and the path of the hypotheses file.
"""

import argparse
import json
import logging
import os
import re
import subprocess
import sys

from fairseq_autoassist.errors import AutoAssistConfigError
from fairseq_autoassist.recipes import (PLUGIN_DIR, prepared_test_sets, require_prepared, split_named,
                                        write_atomically)

logger = logging.getLogger("evaluate_bleu")


class EvaluationError(RuntimeError):
    """Bad input; the message names the file or flag to fix."""


def prepared_info(data):
    try:
        info = require_prepared(data)
    except AutoAssistConfigError as error:
        raise EvaluationError(str(error)) from error
    return info


def generate(checkpoint, data, split, beam, max_tokens, cpu, src, tgt, lenpen=1.0):
    """Hypotheses in sentencepiece pieces, in corpus order."""
    command = [
        sys.executable, "-m", "fairseq_cli.generate", data,
        "--user-dir", PLUGIN_DIR, "--task", "translation",
        "--source-lang", src, "--target-lang", tgt,
        "--path", checkpoint, "--gen-subset", split,
        "--beam", str(beam), "--lenpen", str(lenpen), "--max-tokens", str(max_tokens),
        "--num-workers", "0",
        # The default multiple of 8 silently drops the last sentences of the split (fairseq issue 5036).
        "--required-batch-size-multiple", "1",
    ]
    if cpu:
        command.append("--cpu")
    logger.info("generating: %s", " ".join(command))
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise EvaluationError(f"fairseq-generate failed:\n{result.stderr[-3000:]}")
    hypotheses = {}
    for line in result.stdout.splitlines():
        if line.startswith("H-"):
            head, _score, text = (line.split("\t") + ["", ""])[:3]
            hypotheses[int(head[2:])] = text
    return [hypotheses[i] for i in sorted(hypotheses)]


def score(hypotheses, references):
    import sacrebleu

    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(bleu_score.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "bleu_detail": str(bleu_score),
        "chrf": round(chrf_score.score, 2),
        "chrf_signature": str(chrf.get_signature()),
    }


def compound_split(line):
    """13a-tokenized ``line`` with each hyphen inside a word split off as ``##AT##-##AT##``."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", Tokenizer13a()(line))


def compound_split_bleu(hypotheses, references):
    """The tokenized BLEU that the AutoAssist paper and fairseq's WMT14 En-De results report: both sides
    tokenized (here with sacreBLEU's 13a tokenizer; fairseq's compound_split_bleu.sh reads Moses-tokenized
    text), each hyphen inside a word split off as ``##AT##-##AT##``, scored without further tokenization.
    Not comparable with detokenized sacreBLEU."""
    import sacrebleu

    bleu = sacrebleu.metrics.BLEU(tokenize="none")
    result = bleu.corpus_score([compound_split(h) for h in hypotheses], [[compound_split(r) for r in references]])
    return {"compound_split_bleu": round(result.score, 2),
            "compound_split_bleu_note": "tokenized (13a), compound-split, tokenize=none: "
                                        + str(bleu.get_signature())}


def checkpoint_updates(checkpoint):
    """The number of updates at which fairseq saved ``checkpoint``."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    return state["optimizer_history"][-1]["num_updates"]


def evaluate(checkpoint, data, split="test", beam=5, max_tokens=8000, cpu=None, output=None, lenpen=1.0,
             with_compound_split=False):
    import sentencepiece as spm
    import torch

    if not os.path.isfile(checkpoint):
        raise EvaluationError(f"--checkpoint {checkpoint} does not exist")
    info = prepared_info(data)
    src, tgt, test_sets = info["source"], info["target"], prepared_test_sets(info)
    split = split_named(info, split)
    reference_path = os.path.join(data, "raw", f"{split}.{tgt}")
    if not os.path.isfile(reference_path):
        names = ", ".join(["valid"] + [f"{s} ({name})" for s, name in test_sets.items()])
        raise EvaluationError(f"{reference_path} is missing; --split must be one of this folder's splits: {names}")
    with open(reference_path, encoding="utf-8") as f:
        references = f.read().rstrip("\n").split("\n")
    if cpu is None:
        cpu = not torch.cuda.is_available()
    pieces = generate(checkpoint, data, split, beam, max_tokens, cpu, src, tgt, lenpen)
    if len(pieces) != len(references):
        raise EvaluationError(f"got {len(pieces)} hypotheses for {len(references)} references in {reference_path}")
    model = spm.SentencePieceProcessor(model_file=os.path.join(data, "spm.model"))
    hypotheses = [model.decode(p.split()) for p in pieces]

    output = output or os.path.join(os.path.dirname(os.path.abspath(checkpoint)), f"bleu_{split}.json")
    hypotheses_path = os.path.splitext(output)[0] + ".hyp.txt"
    write_atomically(hypotheses_path, "\n".join(hypotheses) + "\n")
    result = {
        "checkpoint": os.path.abspath(checkpoint),
        "checkpoint_updates": checkpoint_updates(checkpoint),
        "data": os.path.abspath(data),
        "split": split,
        "test_set": test_sets.get(split, split),
        "beam": beam,
        "lenpen": lenpen,
        "sentences": len(hypotheses),
        "hypotheses": os.path.abspath(hypotheses_path),
        **score(hypotheses, references),
        **(compound_split_bleu(hypotheses, references) if with_compound_split else {}),
    }
    # Written last and atomically: its presence tells the benchmark that the run is complete.
    write_atomically(output, json.dumps(result, indent=2))
    return result, output


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a fairseq checkpoint (.pt)")
    parser.add_argument("--data", default=os.path.join("data-bin", "multi30k.de-en"),
                        help="prepared data-bin folder (default: data-bin/multi30k.de-en)")
    parser.add_argument("--split", default="test",
                        help="valid, test, or a further test split by its fairseq or its test set's name (test1 or "
                        "test_2017_flickr; see test_sets in the folder's prepare.json); a fairseq split's name "
                        "wins over a test set's")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--lenpen", type=float, default=1.0, help="length penalty (WMT14: 0.6)")
    parser.add_argument("--compound-split-bleu", action="store_true",
                        help="also report the tokenized compound-split BLEU of the paper and fairseq's WMT14 results")
    parser.add_argument("--max-tokens", type=int, default=8000)
    parser.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    parser.add_argument("--output", default=None, help="JSON output (default: bleu_SPLIT.json beside the checkpoint)")
    args = parser.parse_args(argv)
    cpu = None if args.device == "auto" else args.device == "cpu"
    try:
        result, output = evaluate(args.checkpoint, args.data, args.split, args.beam, args.max_tokens, cpu, args.output,
                                  args.lenpen, args.compound_split_bleu)
    except EvaluationError as error:
        logger.error("%s", error)
        return 2
    print(f"{args.split} {result['bleu_detail']}")
    print(f"BLEU signature: {result['bleu_signature']}")
    print(f"chrF2 = {result['chrf']:.2f}  signature: {result['chrf_signature']}")
    if "compound_split_bleu" in result:
        print(f"tokenized compound-split BLEU = {result['compound_split_bleu']:.2f} "
              f"({result['compound_split_bleu_note']})")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
