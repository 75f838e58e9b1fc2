"""The labelled BLEU variants of autoassist-evaluate (fairseq_autoassist/evaluate.py; no model needed)."""

from fairseq_autoassist.evaluate import compound_split, compound_split_bleu


def test_compound_split_tokenizes_and_splits_hyphens_inside_words():
    assert compound_split("Ein gut-gelaunter Hund, heute.") == "Ein gut ##AT##-##AT## gelaunter Hund , heute ."
    assert compound_split("a - b") == "a - b"


def test_compound_split_bleu_is_labelled_and_scores_split_tokens():
    same = compound_split_bleu(["Ein gut-gelaunter Hund."], ["Ein gut-gelaunter Hund."])
    assert same["compound_split_bleu"] == 100.0 and "tok:none" in same["compound_split_bleu_note"]
    # Without splitting, "gut-gelaunter" against "gut gelaunter" shares no 2-gram across the hyphen.
    joined = compound_split_bleu(["Ein gut gelaunter Hund ist hier ."], ["Ein gut-gelaunter Hund ist hier ."])
    assert 0 < joined["compound_split_bleu"] < 100
