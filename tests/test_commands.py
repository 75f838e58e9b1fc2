"""The console commands: ``pip install`` of the package alone (no checkout on the path) gives every one of them, and
``python -m fairseq_autoassist --help`` lists them."""

import os
import shutil
import site
import subprocess
import sys

import pytest

from fairseq_autoassist.commands import COMMANDS, VERSION

from .conftest import ROOT, run_script


def test_the_changelog_opens_with_this_version():
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        headings = [line for line in f.read().splitlines() if line.startswith("## ")]
    assert headings[0].startswith(f"## {VERSION} ")


def test_the_options_help_lists_every_console_command():
    printed = run_script("-m", "fairseq_autoassist", "--help").stdout
    assert "--autoassist-policy" in printed
    for name in COMMANDS:
        assert name in printed


@pytest.mark.slow
def test_a_pip_install_gives_every_console_command_without_the_repository(tmp_path):
    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    fresh_python = fresh / "bin" / "python"
    fresh_site = subprocess.run([str(fresh_python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                check=True, capture_output=True, text=True).stdout.strip()
    # torch, fairseq and the rest from this environment (read as a plain path: its editable install of this package,
    # a .pth file, is not processed there); the package itself installed into the fresh one, not editable.
    with open(os.path.join(fresh_site, "dependencies.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    # From a copy of what the package is made of: the build writes beside its sources, and the checkout stays clean.
    source = tmp_path / "source"
    shutil.copytree(os.path.join(ROOT, "fairseq_autoassist"), source / "fairseq_autoassist",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "README.md"):
        shutil.copy(os.path.join(ROOT, name), source / name)
    subprocess.run([str(fresh_python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet",
                    "--disable-pip-version-check", str(source)], check=True, cwd=tmp_path)
    where = subprocess.run([str(fresh_python), "-c", "import fairseq_autoassist; print(fairseq_autoassist.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(fresh_site), where
    version = subprocess.run([str(fresh_python), "-m", "fairseq_autoassist", "--version"], check=True,
                             capture_output=True, text=True, cwd=tmp_path).stdout
    assert version == f"fairseq-autoassist {VERSION}\n"
    for name in COMMANDS:
        result = subprocess.run([str(fresh / "bin" / name), "--help"], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.startswith(f"usage: {name}")
