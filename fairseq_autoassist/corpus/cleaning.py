"""Static cleaning of a parallel corpus, as the field does it before any training (no fairseq import).

Each rule removes the pairs it finds, in this order, and a pair counts for the first rule that removes it:

* ``duplicate``: an exact copy of an earlier pair;
* ``near_duplicate``: equal to an earlier pair once case, digits, punctuation and spacing are ignored;
* ``length`` (off by default): a side of more than ``max_pieces`` sentencepiece pieces (fairseq's WMT preparation:
  250);
* ``length_ratio``: one side more than ``max_length_ratio`` times as long as the other, in sentencepiece pieces
  (fairseq's WMT preparation filters at 1.5 with ``clean-corpus-n.perl`` on subwords);
* ``copy``: the target copies the source: at least ``max_copy_overlap`` of the target's words occur in the source;
* ``language``: a side that CLD2 (``pycld2``) reliably detects as another language than the side's;
* ``lexical`` (off by default): after the rules above, over the pairs they kept, a lexical translation score more
  than ``lexical_below`` standard deviations below their mean (the pair features' score,
  ``assistant/bilingual.py``: how strongly the target's rarest pieces co-occur with the source's across the corpus
  itself). It finds pairs whose sides are fluent but unrelated (misaligned) where the corpus shows its own
  vocabulary translated many times (in-domain corpora); on web-mined pairs of every domain it does not
  (docs/results/paracrawl/), which is why it is off unless asked for.

CLD2 was chosen among the offline language identifiers that install here from a prebuilt wheel: it reads a
sentence in 4-8 microseconds (``langid`` 40-60, so 2 minutes per million pairs), and it says when it cannot
tell ("unknown", kept). On 1,000 sentences of each side of Multi30K and Tatoeba it named the right language for
95-100% of them and a wrong one, reliably, for 0-1.6% (short German imperatives such as "Vergib Tom!"): the
clean pairs this rule costs, which the report's counts show on a noisy copy with its noise list. A side declared in
the wrong language (French under German file names, or ``--src de`` for French) would lose nearly every pair to
the rule, so ``clean`` first checks the declared languages against a sample and stops with one line where a side's
text is mostly another language (``check_declared_languages``). Languages compare by their primary subtag (CLD2's
``zh-Hant`` is ``zh``).
"""

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from ..option_fields import option, option_fields, value_problem
from .raw_corpus import PreparationError

RULES = ("duplicate", "near_duplicate", "length", "length_ratio", "copy", "language", "lexical")
# fairseq's dictionaries put their four special symbols (<s>, <pad>, </s>, <unk>) before the pieces.
SPECIAL_SYMBOLS = 4
END_OF_SENTENCE = 2


@dataclass
class CleaningOptions:
    """Which rules run, and their thresholds (each an ``autoassist-prepare --clean`` option)."""

    duplicates: bool = option(True, "remove exact duplicate pairs")
    near_duplicates: bool = option(True, "remove pairs equal to an earlier one up to case, digits, punctuation and "
                                   "spacing")
    max_pieces: int = option(0, "remove pairs with a side of more than this many sentencepiece pieces (0: off; "
                             "fairseq's WMT recipe: 250)", minimum=0)
    max_length_ratio: float = option(1.5, "remove pairs whose longer side has more than this many times the "
                                     "sentencepiece pieces of the shorter (0: off)", minimum=0)
    max_copy_overlap: float = option(0.8, "remove pairs in which at least this share of the target's words occur in "
                                     "the source (a copied, untranslated source; 0: off)", minimum=0, maximum=1)
    language: bool = option(True, "remove pairs with a side that CLD2 reliably detects as another language")
    lexical_below: float = option(0.0, "remove pairs whose lexical translation score (the pair features') lies more "
                                  "than this many standard deviations below the mean of the pairs the other rules "
                                  "kept (0: off; for in-domain corpora, not web-mined ones)", minimum=0)


_NOT_LETTERS = re.compile(r"[\W\d_]+", re.UNICODE)


def normalized(text):
    """Lower case letters only, single-spaced: what near-duplicates share."""
    return _NOT_LETTERS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def copy_overlap(normalized_source, normalized_target):
    """Share of the target's words that occur in the source (both ``normalized``)."""
    target_words = normalized_target.split()
    if not target_words:
        return 0.0
    source_words = set(normalized_source.split())
    return sum(word in source_words for word in target_words) / len(target_words)


def language_detector():
    """``detect(text) -> language code or None`` (None: CLD2 cannot tell reliably)."""
    try:
        import pycld2
    except ImportError:
        raise PreparationError("the language rule needs pycld2 (pip install pycld2, which scripts/setup_env.sh "
                               "installs); or switch the rule off with --no-clean-language") from None

    def detect(text):
        try:
            reliable, _, found = pycld2.detect(text)
        except pycld2.error:
            return None
        code = found[0][1]
        return code if reliable and code != "un" else None

    return detect


# ``check_declared_languages``: pairs read, evenly spaced, and the share of a side's reliable detections below which
# its declared language counts as contradicted.
LANGUAGE_CHECK_PAIRS = 2000
LANGUAGE_CHECK_SHARE = 0.5


def primary_language(code):
    """The primary subtag of a language code: ``zh-Hant`` -> ``zh``."""
    return code.split("-")[0].lower()


def check_declared_languages(source, target, src_lang, tgt_lang, detect, sample=LANGUAGE_CHECK_PAIRS):
    """``{"source": (declared, the most common detected language, its share), "target": ...}`` over up to
    ``sample`` pairs evenly spaced, counting the reliable detections only; raises ``PreparationError`` naming the
    side and the flags where the declared language is under ``LANGUAGE_CHECK_SHARE`` of a side's detections."""
    picked = np.unique(np.linspace(0, len(source) - 1, min(sample, len(source))).astype(np.int64)) if source else []
    found = {}
    for side, flag, lines, declared in (("source", "--src", source, src_lang), ("target", "--tgt", target, tgt_lang)):
        detected = [code for code in (detect(lines[i]) for i in picked) if code is not None]
        counts = {}
        for code in map(primary_language, detected):
            counts[code] = counts.get(code, 0) + 1
        if not counts:
            found[side] = (declared, None, 0.0)
            continue
        common = max(counts, key=counts.get)
        share = counts.get(primary_language(declared), 0) / len(detected)
        found[side] = (declared, common, counts[common] / len(detected))
        if share < LANGUAGE_CHECK_SHARE:
            raise PreparationError(
                f"the {side} side is declared '{declared}' ({flag} {declared}) but reads as '{common}' in "
                f"{counts[common]} of the {len(detected)} sampled pairs CLD2 could tell; declare its language with "
                f"{flag} {common} (and the file names that go with it), or switch the language rule off with "
                "--no-clean-language")
    return found


def pair_features(encode, vocab_size, source, target):
    """The ``PairFeatures`` of the pairs ``source``/``target`` (lists of text) as fairseq would binarize them:
    ``encode(texts) -> [piece ids]`` of a piece model of ``vocab_size`` pieces, ids placed after fairseq's special
    symbols, ``</s>`` last."""
    from ..assistant import CorpusSide, PairFeatures  # the package imports torch: only when the lexical rule runs

    def side(lines):
        rows = [np.r_[np.asarray(ids, dtype=np.int64) + SPECIAL_SYMBOLS, END_OF_SENTENCE] for ids in encode(lines)]
        return CorpusSide(np.concatenate(rows), np.r_[0, np.cumsum([len(row) for row in rows])])

    return PairFeatures(side(source), side(target), vocab_size=vocab_size + SPECIAL_SYMBOLS)


def clean(source, target, src_lang, tgt_lang, options, pieces=None, encode=None, vocab_size=None):
    """The indices of the pairs every enabled rule keeps, and ``{rule: [removed indices]}``.

    ``pieces(text) -> number of pieces`` measures the length ratio (needed when ``max_length_ratio`` > 0);
    ``encode`` and ``vocab_size`` (of ``pair_features``) the lexical score (needed when ``lexical_below`` > 0).
    """
    if (options.max_length_ratio > 0 or options.max_pieces > 0) and pieces is None:
        raise ValueError("the length rules need a piece counter")
    if options.lexical_below > 0 and (encode is None or vocab_size is None):
        raise ValueError("the lexical rule needs a piece model (encode, vocab_size)")
    detect = language_detector() if options.language else None
    if detect is not None:
        check_declared_languages(source, target, src_lang, tgt_lang, detect)
    removed = {rule: [] for rule in RULES}
    seen_exact, seen_normalized, kept = set(), set(), []
    for index, (src, tgt) in enumerate(zip(source, target)):
        rule = _first_rule(src, tgt, src_lang, tgt_lang, options, pieces, detect, seen_exact, seen_normalized)
        if rule:
            removed[rule].append(index)
        else:
            kept.append(index)
    if options.lexical_below > 0 and kept:
        kept, removed["lexical"] = lexical_rule(source, target, kept, options.lexical_below, encode, vocab_size)
    return kept, removed


def lexical_rule(source, target, kept, below, encode, vocab_size):
    """The ``lexical`` rule over the pairs ``kept`` by the others: ``(kept, removed)``, the pairs whose lexical score
    lies more than ``below`` standard deviations below the mean of ``kept`` removed (``encode``, ``vocab_size``: of
    ``pair_features``)."""
    from ..assistant.bilingual import NAMES

    features = pair_features(encode, vocab_size, [source[i] for i in kept], [target[i] for i in kept])
    # Standardized over the kept pairs by bilingual.compute.
    passes = features.bilingual()[:, NAMES.index("lexical_translation")].astype(np.float64) >= -below
    return [i for i, ok in zip(kept, passes) if ok], [i for i, ok in zip(kept, passes) if not ok]


def _first_rule(src, tgt, src_lang, tgt_lang, options, pieces, detect, seen_exact, seen_normalized):
    if options.duplicates:
        if (src, tgt) in seen_exact:
            return "duplicate"
        seen_exact.add((src, tgt))
    key = (normalized(src), normalized(tgt))
    if options.near_duplicates:
        if key in seen_normalized:
            return "near_duplicate"
        seen_normalized.add(key)
    if options.max_pieces > 0 or options.max_length_ratio > 0:
        lengths = sorted((max(pieces(src), 1), max(pieces(tgt), 1)))
        if 0 < options.max_pieces < lengths[1]:
            return "length"
        if options.max_length_ratio > 0 and lengths[1] > options.max_length_ratio * lengths[0]:
            return "length_ratio"
    if options.max_copy_overlap > 0 and copy_overlap(*key) >= options.max_copy_overlap:
        return "copy"
    if detect is not None and any(found is not None and primary_language(found) != primary_language(lang)
                                  for found, lang in ((detect(src), src_lang), (detect(tgt), tgt_lang))):
        return "language"
    return None


def dual_cross_entropy(forward, backward):
    """Junczys-Dowmunt's (2018) dual conditional cross-entropy of each pair: ``|H_fwd - H_bwd| + (H_fwd + H_bwd) / 2``
    from its per-token cross-entropies under a model of each direction (``forward``: target given source,
    ``backward``: source given target). Low where both models find the pair likely and agree; NaN where either is
    unscored. The best-scoring single feature of the WMT18 parallel corpus filtering task."""
    forward = np.asarray(forward, dtype=np.float64)
    backward = np.asarray(backward, dtype=np.float64)
    return np.abs(forward - backward) + 0.5 * (forward + backward)


def add_arguments(parser):
    """``--clean`` and a flag per rule (``--no-clean-RULE`` or ``--clean-THRESHOLD VALUE``) on ``parser``."""
    parser.add_argument("--clean", action="store_true", help="clean the training pairs with the rules below "
                        "first (fairseq_autoassist/corpus/cleaning.py); prepare.json reports what each removed")
    for f in option_fields(CleaningOptions):
        name = f.name
        if f.type is bool:
            parser.add_argument(f"--no-clean-{name.replace('_', '-')}", dest=f"clean_{name}", action="store_false",
                                help=f"with --clean, do not {f.metadata['help']}")
        else:
            parser.add_argument(f"--clean-{name.replace('_', '-')}", dest=f"clean_{name}", type=f.type,
                                default=f.default, help=f"with --clean, {f.metadata['help']} (default {f.default})")


def options_from(args):
    """The ``CleaningOptions`` of parsed ``add_arguments`` flags, or None without ``--clean``."""
    if not args.clean:
        return None
    options = CleaningOptions(**{f.name: getattr(args, f"clean_{f.name}") for f in option_fields(CleaningOptions)})
    for f in option_fields(CleaningOptions):
        problem = value_problem(getattr(options, f.name), f.metadata)
        if problem:
            raise PreparationError(f"--clean-{f.name.replace('_', '-')}={getattr(options, f.name)} {problem}")
    return options
