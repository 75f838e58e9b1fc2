"""A pair classifier trained without human labels, bicleaner's recipe without its downloads (no fairseq import).

Bicleaner (Sánchez-Cartagena et al. 2018; Ramírez-Sánchez et al. 2020) learns what a translation looks like from a
clean parallel corpus: it aligns the clean pairs, keeps a probabilistic dictionary of the links, and trains a
classifier to tell the clean pairs from corrupted copies of them over features that the dictionary and simple
agreements give. Its models are downloads; this module builds the same from a corpus the user trusts:

* ``TranslationDictionary.learn``: eflomal word alignment of the trusted pairs (both directions, lowercased words cut
  to ``STEM`` characters), link counts turned into ``p(target word | source word)`` and ``p(source word | target
  word)``, the most likely ``DICTIONARY_TOP`` translations of each word kept;
* ``synthetic_negatives``: corrupted copies of the pairs, bicleaner's kinds (``NEGATIVE_KINDS``): random re-pairing
  within length buckets, one side truncated, words replaced by others of the side, word order shuffled, a side
  replaced by another sentence sharing a number or a name, the source copied as the target;
* ``pair_table``: per pair, the dictionary's lexical scores and coverage both ways, the word order its links keep,
  lengths, numbers, punctuation, names, copy similarity and the non-letter shares (``FEATURES``);
* ``PairClassifier.train``: the dictionary from one part of the trusted pairs, a logistic regression over the
  standardised features (scikit-learn) from the other part against their negatives, and its threshold from held-out
  pairs and negatives that neither saw: the score that keeps ``keep_share`` of the held-out trusted pairs. ``save`` /
  ``load`` keep it beside the data so a second corpus is scored with it.

Why a linear model: the trusted corpus is rarely of the domain being cleaned, and a flexible model learns the
trusted corpus' own regularities. Trained on Tatoeba and scored on ParaCrawl's judged pairs (AUC of valid against
misaligned and wrong-language pairs), gradient boosting reached 0.721 (0.732 with trees of depth 3), a random forest
0.748, the logistic regression 0.770 (0.775-0.781 with the word-order feature; docs/results/cleaning/classifier/).
"""

import collections
import os
import pickle
import re
import tempfile
from dataclasses import dataclass, field

import numpy as np

WORD = re.compile(r"\w+")
NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
PUNCTUATION = ".,;:!?()\"'-%/"
DICTIONARY_TOP = 20
# Words are cut to their first six characters: German's and English's inflections share a stem, and a web corpus'
# words, which a small trusted corpus has rarely seen whole, more often have a known stem (measured on ParaCrawl's
# judged pairs with a Tatoeba dictionary: AUC 0.712 against 0.695 whole).
STEM = 6
# Links seen fewer times are dropped: a single link is as often the aligner's noise as a translation.
DICTIONARY_MIN_LINKS = 2
# The probability a word without a translation in the other side counts with (bicleaner's floor: 1e-4).
PROBABILITY_FLOOR = 1e-4
NEGATIVE_KINDS = ("misaligned", "truncated", "replaced", "shuffled", "shared_name", "copied")
LENGTH_BUCKET = 50
FEATURES = ("lexical_forward", "lexical_backward", "known_lexical_forward", "known_lexical_backward",
            "covered_forward", "covered_backward", "known_forward", "known_backward", "word_order", "source_chars",
            "target_chars", "source_words", "target_words", "char_log_ratio",
            "numbers_agree", "numbers", "punctuation_distance", "same_final_punctuation", "names_agree",
            "similarity", "source_non_letters", "target_non_letters")
FORMAT_VERSION = 1
MODEL_FILE = "clean-classifier.pkl"


def words(text, stem=None):
    """The lowercased word tokens of ``text`` (letters and digits, any script), each cut to its first ``stem``
    characters where given: the dictionary's unit."""
    found = WORD.findall(text.lower())
    return found if stem is None else [word[:stem] for word in found]


@dataclass
class TranslationDictionary:
    """``given_source[t][s] = p(t | s)`` and ``given_target[s][t] = p(s | t)``, each word's ``DICTIONARY_TOP`` most
    likely entries, keyed by the word being translated into, so a sentence's words are looked up in the other
    sentence's set."""

    given_source: dict = field(default_factory=dict)
    given_target: dict = field(default_factory=dict)
    stem: int = STEM

    @classmethod
    def learn(cls, source, target, workdir=None, stem=STEM):
        """The dictionary of eflomal's links (forward and reverse, both counted) between the words (cut to ``stem``
        characters) of the pairs ``source`` / ``target`` (lists of text)."""
        import eflomal

        source_words = [words(line, stem) for line in source]
        target_words = [words(line, stem) for line in target]
        usable = [i for i in range(len(source)) if source_words[i] and target_words[i]]
        with tempfile.TemporaryDirectory(dir=workdir) as folder:
            forward, reverse = os.path.join(folder, "fwd"), os.path.join(folder, "rev")
            eflomal.Aligner(model=3).align([" ".join(source_words[i]) for i in usable],
                                           [" ".join(target_words[i]) for i in usable],
                                           links_filename_fwd=forward, links_filename_rev=reverse, quiet=True)
            links = collections.Counter()
            for path in (forward, reverse):
                with open(path, encoding="utf-8") as f:
                    for i, line in zip(usable, f):
                        src, tgt = source_words[i], target_words[i]
                        for link in line.split():
                            a, b = link.split("-")
                            links[src[int(a)], tgt[int(b)]] += 1
        return cls.from_links(links, stem)

    @classmethod
    def from_links(cls, links, stem=STEM):
        """The dictionary of ``{(source word, target word): link count}``."""
        links = {pair: count for pair, count in links.items() if count >= DICTIONARY_MIN_LINKS}
        source_totals, target_totals = collections.Counter(), collections.Counter()
        for (s, t), count in links.items():
            source_totals[s] += count
            target_totals[t] += count
        given_source, given_target = collections.defaultdict(dict), collections.defaultdict(dict)
        for (s, t), count in links.items():
            given_source[t][s] = count / source_totals[s]
            given_target[s][t] = count / target_totals[t]
        return cls(_top(given_source), _top(given_target), stem)


def _top(table):
    return {word: dict(sorted(entries.items(), key=lambda item: -item[1])[:DICTIONARY_TOP])
            for word, entries in table.items()}


def _lexical(translated, other, table):
    """(mean log10 probability of each word of ``translated`` given its best translation in ``other``, the same
    over the words the dictionary knows, the share of those that have a translation in ``other``, the share of words
    the dictionary knows)."""
    floor = np.log10(PROBABILITY_FLOOR)
    if not translated:
        return floor, floor, 0.0, 0.0
    other = set(other)
    total, known_total, covered, known = 0.0, 0.0, 0, 0
    for word in translated:
        entries = table.get(word)
        best = 0.0
        if entries is not None:
            known += 1
            for candidate, probability in entries.items():
                if candidate in other and probability > best:
                    best = probability
            covered += best > 0
            known_total += np.log10(max(best, PROBABILITY_FLOOR))
        total += np.log10(max(best, PROBABILITY_FLOOR))
    return (total / len(translated), known_total / known if known else floor, covered / max(known, 1),
            known / len(translated))


def _word_order(translated, other, table):
    """The correlation between the positions of ``translated``'s words and of their best translations in ``other``
    (0 where fewer than three words have one): a shuffled side loses the order its translation keeps, which no
    bag of words sees."""
    first = {}
    for position, word in enumerate(other):
        first.setdefault(word, position)
    points = []
    for position, word in enumerate(translated):
        entries = table.get(word)
        if entries:
            found = [(probability, first[candidate]) for candidate, probability in entries.items()
                     if candidate in first]
            if found:
                points.append((position, max(found)[1]))
    if len(points) < 3:
        return 0.0
    positions = np.array(points, dtype=np.float64)
    if positions[:, 0].std() == 0 or positions[:, 1].std() == 0:
        return 0.0
    return float(np.corrcoef(positions[:, 0], positions[:, 1])[0, 1])


def _names(text):
    """The capitalised words of ``text`` after its first word: names, which a translation carries over."""
    tokens = WORD.findall(text)
    return {token for token in tokens[1:] if token[:1].isupper()}


def _non_letters(text):
    return sum(not (c.isalpha() or c.isspace()) for c in text) / max(len(text), 1)


def pair_table(source, target, dictionary):
    """``(pairs, len(FEATURES))`` float32: each pair's features, higher lexical scores for a likelier translation."""
    from rapidfuzz import fuzz

    rows = np.zeros((len(source), len(FEATURES)), dtype=np.float32)
    for index, (src, tgt) in enumerate(zip(source, target)):
        src_words, tgt_words = words(src, dictionary.stem), words(tgt, dictionary.stem)
        forward = _lexical(tgt_words, src_words, dictionary.given_source)
        backward = _lexical(src_words, tgt_words, dictionary.given_target)
        src_numbers, tgt_numbers = set(NUMBER.findall(src)), set(NUMBER.findall(tgt))
        numbers = src_numbers | tgt_numbers
        src_names, tgt_names = _names(src), _names(tgt)
        names = src_names | tgt_names
        src_punctuation = np.array([src.count(c) for c in PUNCTUATION])
        tgt_punctuation = np.array([tgt.count(c) for c in PUNCTUATION])
        rows[index] = (
            forward[0], backward[0], forward[1], backward[1], forward[2], backward[2], forward[3], backward[3],
            _word_order(tgt_words, src_words, dictionary.given_source),
            len(src), len(tgt), len(src_words), len(tgt_words), np.log((len(src) + 1) / (len(tgt) + 1)),
            len(src_numbers & tgt_numbers) / len(numbers) if numbers else 1.0, len(numbers),
            np.abs(src_punctuation - tgt_punctuation).sum() / (src_punctuation.sum() + tgt_punctuation.sum() + 1),
            src.rstrip()[-1:] == tgt.rstrip()[-1:],
            len(src_names & tgt_names) / len(names) if names else 1.0,
            fuzz.ratio(src.lower(), tgt.lower()) / 100, _non_letters(src), _non_letters(tgt))
    return rows


def synthetic_negatives(source, target, seed=0):
    """``(source, target, kinds)``: one corrupted copy of each pair, its kind drawn evenly from ``NEGATIVE_KINDS``
    (a kind that cannot corrupt a pair, such as shuffling a one-word side, falls back to ``misaligned``).

    ``misaligned`` pairs a source with the target of another pair of about its length (within ``LENGTH_BUCKET`` pairs
    of the length order), ``truncated`` keeps the first 30-70% of one side's words, ``replaced`` swaps 30-60% of one
    side's words for random words of that side, ``shuffled`` shuffles the target's words, ``shared_name`` replaces the
    target by another one that shares a number or a capitalised word with it, ``copied`` puts the source as the
    target."""
    rng = np.random.default_rng(seed)
    pairs = len(source)
    order = np.argsort([len(t) for t in target], kind="stable")
    rank = np.empty(pairs, dtype=np.int64)
    rank[order] = np.arange(pairs)
    vocabulary = [sorted({w for line in side[:20000] for w in line.split()}) for side in (source, target)]
    carriers = collections.defaultdict(list)
    for i, tgt in enumerate(target):
        for name in _names(tgt) | set(NUMBER.findall(tgt)):
            carriers[name].append(i)
    kinds = rng.choice(len(NEGATIVE_KINDS), pairs)
    out_source, out_target, out_kinds = [], [], []
    for i in range(pairs):
        kind = NEGATIVE_KINDS[kinds[i]]
        src, tgt = source[i], target[i]
        side = int(rng.integers(2))
        tokens = (src if side == 0 else tgt).split()
        made = None
        if kind == "truncated" and len(tokens) >= 3:
            made = " ".join(tokens[:max(1, int(len(tokens) * rng.uniform(0.3, 0.7)))])
        elif kind == "replaced" and len(tokens) >= 2 and vocabulary[side]:
            tokens = list(tokens)
            for at in rng.choice(len(tokens), max(1, int(len(tokens) * rng.uniform(0.3, 0.6))), replace=False):
                tokens[at] = vocabulary[side][int(rng.integers(len(vocabulary[side])))]
            made = " ".join(tokens)
        elif kind == "shuffled" and len(tgt.split()) >= 3:
            side, shuffled = 1, list(tgt.split())
            while shuffled == tgt.split():
                rng.shuffle(shuffled)
            made = " ".join(shuffled)
        elif kind == "shared_name":
            sharing = [j for name in _names(tgt) | set(NUMBER.findall(tgt)) for j in carriers[name][:50] if j != i]
            if sharing:
                side, made = 1, target[sharing[int(rng.integers(len(sharing)))]]
        elif kind == "copied":
            side, made = 1, src
        if made is None or made == (src if side == 0 else tgt):
            kind, side = "misaligned", 1
            lo, hi = max(0, rank[i] - LENGTH_BUCKET), min(pairs, rank[i] + LENGTH_BUCKET + 1)
            other = i
            while other == i and pairs > 1:
                other = int(order[rng.integers(lo, hi)])
            made = target[other]
        out_source.append(made if side == 0 else src)
        out_target.append(made if side == 1 else tgt)
        out_kinds.append(kind)
    return out_source, out_target, out_kinds


@dataclass
class PairClassifier:
    """The dictionary, the model over ``pair_table`` and the threshold at which a pair is kept."""

    dictionary: TranslationDictionary
    model: object
    threshold: float
    keep_share: float
    held_out: dict = field(default_factory=dict)
    held_out_scores: np.ndarray = None

    @classmethod
    def train(cls, source, target, keep_share, dictionary_share=0.5, held_out_share=0.1, max_pairs=200000,
              seed=0, workdir=None):
        """Learn from trusted pairs: the dictionary from ``dictionary_share`` of them, the classifier from the rest
        but ``held_out_share`` (trusted pairs, label 1, against one synthetic negative each, label 0), and the threshold
        as the score that keeps ``keep_share`` of the held-out trusted pairs; ``held_out`` reports what it keeps of
        them and of their negatives by kind, ``held_out_scores`` holds their scores (another keep share's
        threshold). At most ``max_pairs`` pairs, drawn at random, are used."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        rng = np.random.default_rng(seed)
        picked = rng.permutation(len(source))[:max_pairs]
        split = int(len(picked) * dictionary_share)
        held = int(len(picked) * held_out_share)
        for_dictionary, for_model, for_threshold = picked[:split], picked[split:len(picked) - held], picked[-held:]
        if min(len(for_dictionary), len(for_model), len(for_threshold)) < 10:
            raise ValueError(f"{len(source)} trusted pairs are too few to train the pair classifier (at least "
                             f"{int(np.ceil(10 / min(dictionary_share, held_out_share)))})")
        dictionary = TranslationDictionary.learn([source[i] for i in for_dictionary],
                                                 [target[i] for i in for_dictionary], workdir)

        def with_negatives(at, offset):
            src, tgt = [source[i] for i in at], [target[i] for i in at]
            bad_src, bad_tgt, kinds = synthetic_negatives(src, tgt, seed + offset)
            table = pair_table(src + bad_src, tgt + bad_tgt, dictionary)
            return table, np.r_[np.ones(len(src)), np.zeros(len(bad_src))], np.array(kinds)

        features, labels, _ = with_negatives(for_model, 1)
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(features, labels)
        features, labels, kinds = with_negatives(for_threshold, 2)
        scores = model.predict_proba(features)[:, 1]
        clean_scores = scores[labels == 1]
        threshold = float(np.quantile(clean_scores, 1 - keep_share))
        negatives = scores[labels == 0]
        held_out = {"clean_kept": float((clean_scores >= threshold).mean()),
                    "negatives_kept": {kind: float((negatives[kinds == kind] >= threshold).mean())
                                       for kind in NEGATIVE_KINDS if (kinds == kind).any()}}
        return cls(dictionary, model, threshold, keep_share, held_out, clean_scores)

    def scores(self, source, target):
        """Each pair's probability of being a translation, by the classifier."""
        if not len(source):
            return np.zeros(0)
        return self.model.predict_proba(pair_table(source, target, self.dictionary))[:, 1]

    def keeps(self, source, target):
        return self.scores(source, target) >= self.threshold

    def save(self, path):
        with open(path, "wb") as f:
            pickle.dump({"format": FORMAT_VERSION, "classifier": self}, f)

    @classmethod
    def load(cls, path):
        with open(path, "rb") as f:
            saved = pickle.load(f)
        if not isinstance(saved, dict) or saved.get("format") != FORMAT_VERSION:
            raise ValueError(f"{path} is not a pair classifier of this version (format {FORMAT_VERSION}); train one "
                             "again with --clean-classifier")
        return saved["classifier"]
