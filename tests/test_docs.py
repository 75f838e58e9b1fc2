"""The documentation kept equal to what it describes: the results index lists every result, every link resolves."""

import glob
import os
import re

from .conftest import ROOT

RESULTS = os.path.join(ROOT, "docs", "results")


def test_the_results_index_names_every_result_and_every_archived_one():
    with open(os.path.join(RESULTS, "README.md"), encoding="utf-8") as f:
        index = f.read()
    entries = [name for name in os.listdir(RESULTS) if name not in ("README.md", "archive")]
    entries += [f"archive/{name}" for name in os.listdir(os.path.join(RESULTS, "archive"))]
    for entry in entries:
        # The index names the pre-rule timings as one group and each timing-* pair (.json, .md) by its stem.
        named = re.sub(r"^archive/overhead-[\w-]+\.json$", "archive/overhead-*.json", entry)
        if named.startswith("timing-"):
            named = os.path.splitext(named)[0]
        assert named in index, entry


def test_every_link_in_the_documentation_resolves():
    pages = glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True) + [os.path.join(ROOT, "README.md")]
    broken = []
    for page in pages:
        with open(page, encoding="utf-8") as f:
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read()):
                if not target.startswith(("http://", "https://")) and not os.path.exists(
                        os.path.join(os.path.dirname(page), target)):
                    broken.append(f"{os.path.relpath(page, ROOT)}: {target}")
    assert broken == []


def test_the_readme_is_read_in_two_minutes_with_the_two_commands_on_its_first_screen():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        test_command = f.read().strip().splitlines()[-1]
    assert len(lines) <= 120
    first_screen = "\n".join(lines[:40])
    assert "| your corpus | use | what to expect" in first_screen
    assert "bash scripts/run_multi30k.sh" in first_screen
    assert test_command in first_screen  # CI runs exactly the README's test command
