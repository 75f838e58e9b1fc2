"""autoassist-filter (fairseq_autoassist/reference/filter_pairs.py): a prepared noisy folder without the pairs of the worst
dual cross-entropy, its other splits and dictionary untouched, its noise list following the kept pairs."""

import json

import numpy as np
import pytest

from fairseq_autoassist.corpus.raw_corpus import NOISE_LIST, read_noise

from .conftest import run_script


@pytest.mark.slow
def test_the_filtered_folder_keeps_the_datas_pieces_and_reports_what_it_removed(raw_corpus, tmp_path):
    from fairseq_autoassist.reference.models import load_split
    from scripts import prepare_multi30k
    from scripts.research import make_noisy_corpus

    make_noisy_corpus.make_noisy_corpus(raw_corpus, str(tmp_path / "noisy"), "de", "en", share=0.25, seed=3)
    data = tmp_path / "bin"
    prepare_multi30k.prepare(str(tmp_path / "noisy"), str(data), "de", "en", vocab_size=120, download=False)
    noise = read_noise(str(data / NOISE_LIST))
    # Scores as two reference models would give them: the corrupted pairs unlikely in both directions.
    forward = np.full(400, 1.0, dtype=np.float32)
    backward = np.full(400, 1.2, dtype=np.float32)
    for line in noise:
        forward[line], backward[line] = 6.0, 6.5
    np.save(tmp_path / "fwd.npy", forward)
    np.save(tmp_path / "bwd.npy", backward)
    dest = tmp_path / "filtered"
    run_script("-m", "fairseq_autoassist.reference.filter_pairs", "--data", str(data), "--dual-xent", str(tmp_path / "fwd.npy"),
               str(tmp_path / "bwd.npy"), "--above", "3.0", "--dest", str(dest))
    info = json.loads((dest / "prepare.json").read_text())
    report = info["filtered"]
    assert report["removed"] == len(noise) == 100 and info["pairs"]["train"] == 300
    assert sum(report["by_kind"].values()) == 100 and "clean" not in report["by_kind"]
    assert report["kept_share_by_kind"]["clean"] == 1.0
    assert not (dest / NOISE_LIST).read_text().splitlines()[1:]  # no corrupted pair left to list
    for name in ("dict.de.txt", "dict.en.txt", "spm.model", "valid.de-en.de.bin", "test.de-en.en.bin"):
        assert (dest / name).read_bytes() == (data / name).read_bytes()
    clean = [i for i in range(400) if i not in noise]
    kept, _ = load_split(str(dest), "train", "en")
    original, _ = load_split(str(data), "train", "en")
    assert len(kept) == 300 and all(kept[n].tolist() == original[i].tolist() for n, i in enumerate(clean))
    refused = run_script("-m", "fairseq_autoassist.reference.filter_pairs", "--data", str(data), "--dual-xent",
                         str(tmp_path / "fwd.npy"), str(tmp_path / "missing.npy"), "--above", "3.0", "--dest",
                         str(tmp_path / "refused"), check=False)
    assert refused.returncode == 2 and "missing.npy does not exist" in refused.stdout
