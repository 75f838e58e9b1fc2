"""Cleaning a parallel corpus before training with the field's filters (OpusFilter and the libraries under it; no
fairseq import).

Each filter removes the pairs it finds, in this order, and a pair counts for the first filter that removes it:

* ``duplicate``: an exact copy of an earlier pair (OpusFilter's ``SegmentHasher``, xxhash);
* ``near_duplicate``: equal to an earlier pair once case and everything but letters are ignored (the same hasher,
  ``lowercase`` and ``letters_only``);
* ``length`` (off by default): a side of more than ``max_pieces`` sentencepiece pieces (OpusFilter's
  ``LengthFilter`` over pieces; fairseq's WMT preparation: 250);
* ``length_ratio``: a pair whose ratio of source to target length, in sentencepiece pieces (they count a side
  without spaces too), is more than ``max_length_ratio`` times the corpus' median ratio or less than its inverse.
  OpusFilter's ``LengthRatioFilter`` compares the plain ratio, which suits languages of similar length: a Chinese side
  has about half the pieces of its English one, and the plain ratio removed a quarter of TVsub's valid pairs;
* ``copy``: the target is (nearly) the source: Levenshtein similarity of the lowercased sides of at least
  ``max_similarity`` (OpusFilter's ``SimilarityFilter``, RapidFuzz);
* ``language``: a side that HeLI-OTS (``heliport``, its model inside the wheel) identifies as another language than
  the declared one, by more than ``language_margin`` in its score (a per-character log probability: short sentences
  that fit several languages almost equally, "Vergib Tom!", stay). Japanese without kana is read as Chinese: heliport
  takes many short simplified Chinese lines for Japanese, which always writes some kana;
* ``alignment``: over the pairs the filters above kept, the eflomal word alignment score of each pair (OpusFilter's
  ``WordAlignFilter``, the mean of both directions; the aligner learns from the corpus itself, over sentencepiece
  pieces) compared with the scores of random pairings of sides of its length (within its tenth of the pairs by total
  length), aligned with them: a pair scoring worse than the best ``alignment_like_random`` of those random pairings is
  removed. It finds fluent sides that do not translate each other (misaligned, truncated). Random pairings calibrate
  the threshold on each corpus without labels: a threshold in standard deviations of the corpus' own scores removes a
  fixed tail of a clean corpus (5-7% at the one that suited the noisy copies) and less than that of a noisy one, whose
  misaligned pairs widen the spread; pairings of the pair's length keep a long translation among short pairs from
  looking random (an aligner's cost per piece grows with length);
* ``classifier`` (off by default, ``--clean-classifier``): a pair that a classifier trained without labels, bicleaner's
  recipe (``classifier.py``: a probabilistic dictionary from eflomal's alignment of trusted pairs, a logistic
  regression telling them from synthetic corruptions of them), scores below the score that keeps
  ``classifier_keep`` of held-out trusted pairs. The trusted pairs are ``trusted`` (a parallel corpus the user
  trusts) or else the pairs the filters above kept; ``classifier_model`` scores with a saved classifier instead.
  Unlike the filters above it sees web misalignment: on ParaCrawl's pairs judged by people, trained on Tatoeba
  alone, it ranks valid pairs above misaligned and wrong-language ones at AUC 0.775 (bicleaner: 0.758; the
  alignment filter's score: 0.59);
* ``lm`` (off by default): a side whose cross-entropy under a character 6-gram model of its own side of the kept
  pairs (VariKN, OpusFilter's ``CrossEntropyFilter``) lies more than ``lm_above`` robust standard deviations above
  their median.

The language model filter's threshold is in robust standard deviations (the median absolute deviation times 1.4826)
of the pairs being filtered. Every default was chosen on the development noisy copy (docs/results/cleaning/).
``pair_badness`` folds every filter's score into one number per pair, its largest score over its threshold: a pair
is removed where it is at least 1.

OpusFilter itself is used for its filter classes only: its pipeline reads and writes files, where ``clean`` works on
the lines ``autoassist-prepare`` already holds.
"""

import collections
import os
import re
import time
from dataclasses import dataclass

import numpy as np

from ..option_fields import option, option_fields, value_problem
from .classifier import MODEL_FILE, PairClassifier
from .raw_corpus import PreparationError, find_raw_file, read_parallel

FILTERS = ("duplicate", "near_duplicate", "length", "length_ratio", "copy", "language", "alignment", "classifier", "lm")
ROBUST_SCALE = 1.4826
# Random pairings aligned beside the corpus: a tenth of its pairs, at least this many (sources drawn more than once in
# a smaller corpus), each within one of LENGTH_BUCKETS shares of the pairs by length; a bucket with fewer pairings
# than MIN_BUCKET_PAIRINGS is compared with them all.
RANDOM_PAIRINGS = 2000
LENGTH_BUCKETS = 10
MIN_BUCKET_PAIRINGS = 50
LM_ORDER = 6
# A language margin or alignment score that stands for "unscorable" (a language heliport does not know, an empty or
# infinite eflomal score): far beyond any threshold.
UNSCORED = 99.0
# What scripts/setup_env.sh installs, as does ``pip install fairseq-autoassist[clean]``.
INSTALL = "pip install 'opusfilter[eflomal,varikn,heliport]'"


@dataclass
class CleaningOptions:
    """Which filters run, and their thresholds (each an ``autoassist-prepare --clean`` option)."""

    duplicates: bool = option(True, "remove exact duplicate pairs")
    near_duplicates: bool = option(True, "remove pairs equal to an earlier one up to case and everything but letters")
    max_pieces: int = option(0, "remove pairs with a side of more than this many sentencepiece pieces (0: off; "
                             "fairseq's WMT recipe: 250)", minimum=0)
    max_length_ratio: float = option(2.0, "remove pairs whose ratio of source to target sentencepiece pieces is "
                                     "more than this many times the corpus' median ratio, or less than its inverse "
                                     "(0: off)", minimum=0)
    max_similarity: float = option(0.9, "remove pairs whose lowercased sides have at least this Levenshtein "
                                   "similarity (a copied, untranslated source; 0: off)", minimum=0, maximum=1)
    language: bool = option(True, "remove pairs with a side that heliport identifies as another language")
    language_margin: float = option(1.0, "how much better another language must fit a side than the declared one "
                                    "(heliport's per-character score) for the language filter to remove it",
                                    minimum=0)
    alignment_like_random: float = option(0.15, "remove pairs whose eflomal word alignment score is no better than "
                                          "that of this share of random pairings of the corpus' own sides of its "
                                          "length (0: off)",
                                          minimum=0, maximum=1)
    classifier: bool = option(False, "remove pairs that a classifier trained without labels on trusted pairs "
                              "(bicleaner's recipe) scores below its threshold")
    classifier_keep: float = option(0.97, "with --clean-classifier, the share of held-out trusted pairs its "
                                    "threshold keeps", minimum=0, maximum=1, exclude_minimum=True)
    trusted: str = option("", "with --clean-classifier, the parallel corpus it learns from, PATH.SRC and PATH.TGT "
                          "(plain or .gz; default: the corpus itself after the filters before it)")
    classifier_model: str = option("", "with --clean-classifier, score with the classifier saved at this path (the "
                                   f"{MODEL_FILE} of an earlier preparation) instead of training one")
    lm_above: float = option(0.0, "remove pairs with a side whose character language model cross-entropy lies more "
                             "than this many robust standard deviations above the median (0: off)", minimum=0)


# Hiragana, katakana and their half-width forms: Japanese text always has some, Chinese none.
KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")


def _requires(module, flag):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise PreparationError(f"cleaning needs {module.split('.')[0]} ({INSTALL}, which scripts/setup_env.sh "
                               f"installs); or switch its filter off with {flag}") from None


def robust_z(scores):
    """``(scores - median) / (1.4826 * median absolute deviation)``: standard deviations where most are normal."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) == 0:
        return scores
    median = np.median(scores)
    spread = ROBUST_SCALE * np.median(np.abs(scores - median))
    return (scores - median) / (spread if spread > 0 else 1.0)


def language_code(code, flag):
    """The ISO 639-3 code that ``code`` (639-1 or 639-3, a region or script subtag allowed: ``zh-Hant``) and
    heliport's answers compare by: a macrolanguage's, where the language belongs to one (``cmn`` -> ``zho``)."""
    iso639 = _requires("iso639", "--no-clean-language")
    try:
        lang = iso639.Lang(code.split("-")[0].split("_")[0].lower())
    except iso639.exceptions.InvalidLanguageValue:
        raise PreparationError(f"{flag} {code} is not an ISO 639 language code; declare the side's language as "
                               "one (de, en, zh, ...), or switch the language filter off with --no-clean-language"
                               ) from None
    macro = lang.macro()
    return (macro or lang).pt3


def short_code(code):
    """The ISO 639-1 code of a ``language_code`` where the language has one (``deu`` -> ``de``), else itself."""
    import iso639

    return iso639.Lang(code).pt1 or code


class LanguageIdentifier:
    """heliport's identifications in ISO 639-3 codes (``language_code``), and how far the declared language is
    behind the best."""

    def __init__(self):
        self.identifier = _requires("heliport", "--no-clean-language").Identifier()
        self._codes = {}

    def _code(self, found):
        if found not in self._codes:
            self._codes[found] = None if found in ("und", "zxx") else language_code(found, "heliport")
        return self._codes[found]

    def identify(self, text):
        """The language of ``text``, or None where heliport cannot tell."""
        if not text.strip():
            return None
        found = self._code(self.identifier.identify(text))
        return "zho" if found == "jpn" and not KANA.search(text) else found

    def identify_with_margins(self, lines, declared):
        """Per line, its language (``identify``) and how much worse the declared language (a ``language_code``)
        scores than the best language (0 where it is the best or heliport cannot tell; ``UNSCORED`` where heliport
        does not know it)."""
        codes, margins = [], np.zeros(len(lines))
        for index, text in enumerate(lines):
            found = self.identify(text)
            codes.append(found)
            if found is None or found == declared:
                continue
            scores = self.identifier.identify_topk_with_score(text, 1000)
            declared_scores = [score for code, score in scores if self._code(code) == declared]
            margins[index] = min(declared_scores) - scores[0][1] if declared_scores else UNSCORED
        return codes, margins


# ``check_declared_languages``: pairs read, evenly spaced, and the share of a side's lines that the language filter
# would remove above which the declared language counts as contradicted.
LANGUAGE_CHECK_PAIRS = 2000
LANGUAGE_CHECK_SHARE = 0.5


def check_declared_languages(source, target, src_lang, tgt_lang, identifier, margin=1.0,
                             sample=LANGUAGE_CHECK_PAIRS):
    """``{"source": (declared, the most common identified language, its share), "target": ...}`` over up to
    ``sample`` pairs evenly spaced; raises ``PreparationError`` naming the side and the flags where the language
    filter (``margin``) would remove more than ``LANGUAGE_CHECK_SHARE`` of a side's lines: a side declared in the
    wrong language (French under German file names, or ``--src de`` for French) would lose nearly every pair."""
    picked = np.unique(np.linspace(0, len(source) - 1, min(sample, len(source))).astype(np.int64)) if source else []
    found = {}
    for side, flag, lines, declared in (("source", "--src", source, src_lang), ("target", "--tgt", target, tgt_lang)):
        sampled = [lines[i] for i in picked]
        codes, margins = identifier.identify_with_margins(sampled, language_code(declared, flag))
        counts = collections.Counter(code for code in codes if code is not None)
        common, times = counts.most_common(1)[0] if counts else (None, 0)
        found[side] = (declared, common, times / max(sum(counts.values()), 1))
        behind = margins > margin
        if sampled and behind.mean() > LANGUAGE_CHECK_SHARE:
            name = short_code(common) if common else "another language"
            raise PreparationError(
                f"the {side} side is declared '{declared}' ({flag} {declared}) but reads as '{name}' in "
                f"{times} of the {len(sampled)} sampled pairs; declare its language with {flag} {name} (and the "
                "file names that go with it), or switch the language filter off with --no-clean-language")
    return found


def alignment_scores(source_pieces, target_pieces):
    """eflomal's alignment score of each pair (lists of pieces per side), forward and reverse: ``(n, 2)``, low where
    the sides translate each other (a negative log probability per piece). The aligner learns from these pairs
    alone."""
    word_alignment = _requires("opusfilter.word_alignment", "--clean-alignment-like-random 0")
    pairs = [(" ".join(src), " ".join(tgt)) for src, tgt in zip(source_pieces, target_pieces)]
    if not pairs:
        return np.zeros((0, 2))
    scores = np.array(list(word_alignment.WordAlignFilter(model=3).score(pairs)), dtype=np.float64)
    return np.nan_to_num(scores, nan=UNSCORED, posinf=UNSCORED, neginf=-UNSCORED)


def length_buckets(source_pieces, target_pieces, buckets=LENGTH_BUCKETS):
    """Each pair's bucket (0 to ``buckets - 1``) among equal shares of the pairs by their total length in pieces."""
    lengths = np.array([len(src) + len(tgt) for src, tgt in zip(source_pieces, target_pieces)])
    edges = np.quantile(lengths, np.linspace(0, 1, buckets + 1)[1:-1]) if len(lengths) else []
    return np.searchsorted(edges, lengths, side="right")


def like_random_shares(source_pieces, target_pieces, seed=0):
    """Per pair, the share of random pairings of sides of its length (each source with the target of another pair
    of its ``length_buckets``) whose mean alignment score is better (lower) than the pair's, all aligned together:
    near 0 for a translation, spread over [0, 1] for a pair no better than a random one. Pairings of any length made
    long translations look random: a long pair's score per piece is worse than a short random pairing's, so 24.6% of
    WMT21's news pairs mixed into Tatoeba fell to it (5.9% with pairings matched in length; docs/results/cleaning/)."""
    pairs = len(source_pieces)
    if pairs < 2:
        return np.zeros(pairs)
    rng = np.random.default_rng(seed)
    bucket = length_buckets(source_pieces, target_pieces)
    drawn_pairings = max(RANDOM_PAIRINGS, pairs // 10)
    sources = rng.choice(pairs, drawn_pairings, replace=drawn_pairings > pairs)
    targets = np.empty_like(sources)
    for b in np.unique(bucket):
        members = np.flatnonzero(bucket == b)
        drawn = np.flatnonzero(bucket[sources] == b)
        if len(members) < 2:  # no other pair of its length: any other pair
            targets[drawn] = (sources[drawn] + rng.integers(1, pairs, len(drawn))) % pairs
            continue
        position = np.searchsorted(members, sources[drawn])
        targets[drawn] = members[(position + rng.integers(1, len(members), len(drawn))) % len(members)]
    scores = alignment_scores(list(source_pieces) + [source_pieces[i] for i in sources],
                              list(target_pieces) + [target_pieces[j] for j in targets]).mean(axis=1)
    own, random_scores, random_bucket = scores[:pairs], scores[pairs:], bucket[sources]
    shares = np.empty(pairs)
    for b in np.unique(bucket):
        reference = random_scores[random_bucket == b]
        if len(reference) < MIN_BUCKET_PAIRINGS:
            reference = random_scores
        at = bucket == b
        shares[at] = np.searchsorted(np.sort(reference), own[at], side="left") / len(reference)
    return shares


def lm_cross_entropies(lines, workdir):
    """Per line, its cross-entropy (bits per character) under a character ``LM_ORDER``-gram model (VariKN, Kneser-Ney
    growing) trained on ``lines`` themselves, written under ``workdir``."""
    lm = _requires("opusfilter.lm", "--clean-lm-above 0")
    params = {"segmentation": {"type": "char"}, "norder": LM_ORDER}
    tokenizer = lm.LMTokenizer(**params)
    tokens = [tokenizer.tokenize(line.strip()) for line in lines]
    data, model = os.path.join(workdir, "lm.seg"), os.path.join(workdir, "lm.arpa")
    with open(data, "w", encoding="utf-8") as f:
        f.writelines(" ".join(line) + "\n" for line in tokens)
    lm.train(data, model, arpa=True, **params)
    scorer = lm.get_lm(filename=model, arpa=True, **params)
    return np.array([lm.word_perplexity(scorer, line)[1] for line in tokens])


@dataclass
class PairScores:
    """Each filter's score of the pairs it saw, aligned with ``clean``'s input (NaN where a filter did not look at
    a pair): ``length_ratio`` (the pair's ratio of pieces over the corpus' median ratio, or its inverse: at least
    1), ``similarity``, ``language`` (the worse side's margin), ``alignment`` (the share of random pairings that
    align better), ``classifier`` (its probability of a translation) and ``lm`` (robust z of the worse side)."""

    length_ratio: np.ndarray
    similarity: np.ndarray
    language: np.ndarray
    alignment: np.ndarray
    classifier: np.ndarray
    lm: np.ndarray

    @classmethod
    def empty(cls, pairs):
        return cls(*(np.full(pairs, np.nan) for _ in range(6)))


def pair_badness(scores, options, classifier_threshold=None):
    """One number per pair: its largest filter score over the filter's threshold (each enabled filter that scored
    it); a pair of badness at least 1 is one the filter removes (but one exactly at the length ratio's or language's
    threshold, which remove above it; the classifier's score counts as ``(1 - score) / (1 - its threshold)``, and
    removes below its threshold, so it needs the threshold ``classifier_threshold``). Unscored pairs (NaN) count as 0.
    """
    parts = [(scores.length_ratio, options.max_length_ratio), (scores.similarity, options.max_similarity),
             (scores.language, options.language_margin if options.language else 0),
             (scores.alignment, options.alignment_like_random), (scores.lm, options.lm_above)]
    badness = np.zeros(len(scores.alignment))
    for values, threshold in parts:
        if threshold > 0:
            badness = np.fmax(badness, np.nan_to_num(values, nan=0.0) / threshold)
    if options.classifier and classifier_threshold is not None:
        badness = np.fmax(badness, np.nan_to_num(1 - scores.classifier, nan=0.0) / max(1 - classifier_threshold, 1e-9))
    return badness


def needs_pieces(options):
    """Whether a filter of ``options`` counts sentencepiece pieces (the length filters) or aligns them."""
    return options.max_length_ratio > 0 or options.max_pieces > 0 or options.alignment_like_random > 0


def clean(source, target, src_lang, tgt_lang, options, segment=None, workdir=None, seconds=None,
          classifier_path=None):
    """The indices of the pairs every enabled filter keeps, ``{filter: [removed indices]}`` and their ``PairScores``.

    ``segment(text) -> [pieces]`` (a sentencepiece model's) measures lengths and feeds the aligner (needed when a
    length filter or the alignment filter is on); ``workdir`` holds the language models (needed when ``lm_above`` >
    0); ``seconds`` (a dict), where given, receives each filter's seconds; ``classifier_path``, where given, receives
    the pair classifier that ``options.classifier`` trained (``PairClassifier.load`` reads it).
    """
    if needs_pieces(options) and segment is None:
        raise ValueError("the length and alignment filters need a sentencepiece segmenter")
    if options.lm_above > 0 and workdir is None:
        raise ValueError("the language model filter needs a working folder")
    seconds = {} if seconds is None else seconds
    scores = PairScores.empty(len(source))
    removed = {name: [] for name in FILTERS}
    kept = np.arange(len(source))
    pieces = {}

    def pieces_of(side, lines, at):
        if side not in pieces:
            pieces[side] = [None] * len(lines)
        for i in at:
            if pieces[side][i] is None:
                pieces[side][i] = segment(lines[i])
        return [pieces[side][i] for i in at]

    for name, field, compute in _filters(options, src_lang, tgt_lang, workdir, classifier_path):
        started = time.perf_counter()
        values, removes = compute(source, target, kept, pieces_of)
        if field is not None:
            getattr(scores, field)[kept] = values
        removed[name] = kept[removes].tolist()
        kept = kept[~removes]
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started
    return kept.tolist(), removed, scores


def _filters(options, src_lang, tgt_lang, workdir, classifier_path=None):
    """``(name, PairScores field, compute)`` of each enabled filter, in ``FILTERS`` order."""
    steps = []
    if options.duplicates:
        steps.append(("duplicate", None, _duplicates(letters_only=False)))
    if options.near_duplicates:
        steps.append(("near_duplicate", None, _duplicates(letters_only=True)))
    if options.max_pieces > 0:
        steps.append(("length", None, _length(options.max_pieces)))
    if options.max_length_ratio > 0:
        steps.append(("length_ratio", "length_ratio", _length_ratio(options.max_length_ratio)))
    if options.max_similarity > 0:
        steps.append(("copy", "similarity", _copy(options.max_similarity)))
    if options.language:
        steps.append(("language", "language", _language(src_lang, tgt_lang, options.language_margin)))
    if options.alignment_like_random > 0:
        steps.append(("alignment", "alignment", _alignment(options.alignment_like_random)))
    if options.classifier:
        steps.append(("classifier", "classifier", _classifier(options, src_lang, tgt_lang, workdir, classifier_path)))
    if options.lm_above > 0:
        steps.append(("lm", "lm", _lm(options.lm_above, workdir)))
    return steps


def _duplicates(letters_only):
    def compute(source, target, kept, pieces_of):
        segment_hash = _requires("opusfilter.segment_hash", "--no-clean-duplicates")
        hasher = segment_hash.SegmentHasher(lowercase=letters_only, letters_only=letters_only)
        seen, removes = set(), np.zeros(len(kept), dtype=bool)
        for position, index in enumerate(kept):
            key = hasher.apply((source[index], target[index]))
            removes[position] = key in seen
            seen.add(key)
        return None, removes
    return compute


def _length(max_pieces):
    def compute(source, target, kept, pieces_of):
        filters = _requires("opusfilter.filters", "--clean-max-pieces 0")
        length = filters.LengthFilter(min_length=0, max_length=max_pieces, unit="word")
        pairs = _piece_pairs(source, target, kept, pieces_of)
        return None, ~np.array([length.accept(score) for score in length.score(pairs)], dtype=bool)
    return compute


def _length_ratio(max_ratio):
    def compute(source, target, kept, pieces_of):
        if not len(kept):
            return np.zeros(0), np.zeros(0, dtype=bool)
        # An empty side counts as one piece, as a sentence of a single piece would.
        lengths = [np.maximum([len(pieces) for pieces in pieces_of(side, lines, kept)], 1)
                   for side, lines in (("source", source), ("target", target))]
        log_ratio = np.log(lengths[0] / lengths[1])
        values = np.exp(np.abs(log_ratio - np.median(log_ratio)))
        return values, values > max_ratio
    return compute


def _copy(max_similarity):
    def compute(source, target, kept, pieces_of):
        filters = _requires("opusfilter.filters", "--clean-max-similarity 0")
        similarity = filters.SimilarityFilter(threshold=max_similarity, unit="char", lowercase=True)
        values = np.array([score[0] for score in similarity.score([(source[i], target[i]) for i in kept])])
        return values, values >= max_similarity
    return compute


def _language(src_lang, tgt_lang, margin):
    def compute(source, target, kept, pieces_of):
        identifier = LanguageIdentifier()
        check_declared_languages(source, target, src_lang, tgt_lang, identifier, margin)
        _, source_margins = identifier.identify_with_margins([source[i] for i in kept],
                                                             language_code(src_lang, "--src"))
        _, target_margins = identifier.identify_with_margins([target[i] for i in kept],
                                                             language_code(tgt_lang, "--tgt"))
        values = np.fmax(source_margins, target_margins)
        return values, values > margin
    return compute


def _alignment(like_random):
    def compute(source, target, kept, pieces_of):
        values = like_random_shares(pieces_of("source", source, kept), pieces_of("target", target, kept))
        return values, values >= like_random
    return compute


def trained_classifier(options, src_lang, tgt_lang, source, target, workdir=None):
    """The ``PairClassifier`` that ``options`` ask for: loaded from ``classifier_model``, else trained on the
    ``trusted`` corpus, else on ``source``/``target`` (the pairs the earlier filters kept)."""
    for module in ("sklearn", "rapidfuzz") + (() if options.classifier_model else ("eflomal",)):
        _requires(module, "no --clean-classifier")
    if options.classifier_model:
        try:
            return PairClassifier.load(options.classifier_model)
        except (OSError, ValueError, EOFError) as error:
            raise PreparationError(f"--clean-classifier-model {options.classifier_model}: {error}; give the "
                                   f"{MODEL_FILE} an earlier --clean-classifier preparation saved") from None
    if options.trusted:
        source, target = read_parallel(os.path.dirname(options.trusted) or ".", os.path.basename(options.trusted),
                                       src_lang, tgt_lang)
    try:
        return PairClassifier.train(source, target, keep_share=options.classifier_keep, workdir=workdir)
    except ValueError as error:
        raise PreparationError(f"--clean-classifier: {error}; give more trusted pairs with --clean-trusted") from None


def _classifier(options, src_lang, tgt_lang, workdir, classifier_path):
    def compute(source, target, kept, pieces_of):
        model = trained_classifier(options, src_lang, tgt_lang, [source[i] for i in kept], [target[i] for i in kept],
                                   workdir)
        if classifier_path is not None:
            model.save(classifier_path)
        values = model.scores([source[i] for i in kept], [target[i] for i in kept])
        return values, values < model.threshold
    return compute


def _lm(above, workdir):
    def compute(source, target, kept, pieces_of):
        values = np.fmax(robust_z(lm_cross_entropies([source[i] for i in kept], workdir)),
                         robust_z(lm_cross_entropies([target[i] for i in kept], workdir)))
        return values, values > above
    return compute


def _piece_pairs(source, target, kept, pieces_of):
    return list(zip((" ".join(p) for p in pieces_of("source", source, kept)),
                    (" ".join(p) for p in pieces_of("target", target, kept))))


def dual_cross_entropy(forward, backward):
    """Junczys-Dowmunt's (2018) dual conditional cross-entropy of each pair: ``|H_fwd - H_bwd| + (H_fwd + H_bwd) / 2``
    from its per-token cross-entropies under a model of each direction (``forward``: target given source,
    ``backward``: source given target). Low where both models find the pair likely and agree; NaN where either is
    unscored. The best-scoring single feature of the WMT18 parallel corpus filtering task."""
    forward = np.asarray(forward, dtype=np.float64)
    backward = np.asarray(backward, dtype=np.float64)
    return np.abs(forward - backward) + 0.5 * (forward + backward)


def add_arguments(parser):
    """``--clean`` and a flag per filter (``--no-clean-NAME`` or ``--clean-THRESHOLD VALUE``) on ``parser``."""
    parser.add_argument("--clean", action="store_true", help="clean the training pairs with the filters below "
                        "first (fairseq_autoassist/corpus/cleaning.py); prepare.json reports what each removed")
    for f in option_fields(CleaningOptions):
        name = f.name
        if f.type is bool and not f.default:
            parser.add_argument(f"--clean-{name.replace('_', '-')}", dest=f"clean_{name}", action="store_true",
                                help=f"with --clean, {f.metadata['help']}")
        elif f.type is bool:
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
    for name in ("trusted", "classifier_model"):
        if getattr(options, name) and not options.classifier:
            raise PreparationError(f"--clean-{name.replace('_', '-')} is given without --clean-classifier, which "
                                   "uses it; add --clean-classifier")
    if options.classifier_model and not os.path.isfile(options.classifier_model):
        raise PreparationError(f"--clean-classifier-model {options.classifier_model} does not exist; give the "
                               f"{MODEL_FILE} an earlier --clean-classifier preparation saved")
    if options.trusted:
        for lang in (args.src, args.tgt):
            if find_raw_file(os.path.dirname(options.trusted) or ".", os.path.basename(options.trusted), lang) is None:
                raise PreparationError(f"--clean-trusted {options.trusted}: {options.trusted}.{lang}[.gz] is missing; "
                                       "give the trusted corpus' path without its language suffix")
    return options
