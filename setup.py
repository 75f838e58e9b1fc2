from setuptools import find_packages, setup

# The version and the console commands, declared once in the package (fairseq_autoassist/commands.py, which imports
# nothing).
commands = {}
exec(open("fairseq_autoassist/commands.py", encoding="utf-8").read(), commands)

setup(
    name="fairseq-autoassist",
    version=commands["VERSION"],
    description=(
        "AutoAssist (Zhang, Yu, Dhillon, NeurIPS 2019) for fairseq: a tiny Assistant model "
        "drops trivial sentence pairs before the Transformer spends compute on them."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["fairseq_autoassist", "fairseq_autoassist.*"]),
    python_requires=">=3.8",
    install_requires=[
        # torch first and pinned by scripts/setup_env.sh; a bare range here would let pip pull a
        # CUDA build on CPU-only machines, so any torch 2.x already installed satisfies it.
        "torch>=2.0",
        "fairseq-fixed==0.12.3.1; python_version >= '3.11'",
        "fairseq==0.12.2; python_version < '3.11'",
        "sacrebleu>=2.0",
        "sentencepiece",
        "numpy",
    ],
    extras_require={"test": ["pytest", "hypothesis"], "plots": ["matplotlib"],
                    # autoassist-prepare --clean (fairseq_autoassist/corpus/cleaning.py); scripts/setup_env.sh pins it
                    "clean": ["opusfilter[eflomal,varikn,heliport]>=3.3"]},
    entry_points={"console_scripts": [f"{name} = {target}" for name, (target, _) in commands["COMMANDS"].items()]},
)
