"""English text that a Moses pipeline tokenized, escaped and lower-cased at each sentence's start, back to raw text
(no fairseq import), so that sacreBLEU's own tokenizer scores against it as against any raw reference.

Some corpora ship their test sets that way (TVsub's ``dev``/``test``: ``it &apos;s all taken care of .``) while their
training text is raw; scoring raw hypotheses against tokenized references would count every split-off apostrophe and
full stop as a mismatch. The rules are those of Moses' English detokenizer: XML entities unescaped, no space before
closing punctuation or after opening brackets, the clitics ``'s``, ``n't``, ``'ll``, ``'re``, ``'ve``, ``'m``, ``'d``
(and ``'t``, as in ``didn 't``) joined to their word, straight double quotes paired (opening, closing, opening, ...); and the first letter of each
sentence (the line's start, after ``.``, ``!`` or ``?``) capitalized, undoing the truecaser's lower-casing. Names
the truecaser kept in their case stay as they are; a word it lower-cased mid-sentence cannot be told from one that is
lower case, and stays so.
"""

import html
import re

_BEFORE_PUNCTUATION = re.compile(r" +([.,!?;:%)\]}…])")
_AFTER_OPENING = re.compile(r"([(\[{$£€]) +")
_CLITICS = re.compile(r"(\w) +('s|'S|n't|N'T|'t|'T|'ll|'re|'ve|'m|'d|'LL|'RE|'VE|'M|'D)\b")
_SENTENCE_START = re.compile(r"(^|[.!?]\s+)([\"(]?)([a-z])")
_ELLIPSIS = re.compile(r"\. \. \.")


def _paired_quotes(text):
    """Straight double quotes joined to the word they open or close, alternately."""
    parts = text.split(' " ')
    out = parts[0]
    for number, part in enumerate(parts[1:]):
        out += (' "' + part) if number % 2 == 0 else ('" ' + part)
    return out


def detokenized(line):
    """One Moses-tokenized, escaped, sentence-lower-cased English line as raw text."""
    text = html.unescape(line.strip())
    text = _ELLIPSIS.sub("...", text)
    text = _CLITICS.sub(r"\1\2", text)
    text = _paired_quotes(f" {text} ").strip()
    text = _BEFORE_PUNCTUATION.sub(r"\1", text)
    text = _AFTER_OPENING.sub(r"\1", text)
    return _SENTENCE_START.sub(lambda match: match.group(1) + match.group(2) + match.group(3).upper(), text)
