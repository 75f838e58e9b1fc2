"""The side-by-side benchmark behind every ratio this project reports; ``scripts/benchmark.py`` is its command.

* ``arms``: the arms (a policy and its settings each) and the presets, and each arm's fairseq-train arguments;
* ``runs``: training an arm to its end, resuming it after a kill, reading a finished run back;
* ``logs``: the records of a fairseq-train log (epochs and every validation);
* ``figures``: every figure of a run, from its validations, against the stock runs of its seed (one pipeline);
* ``report``: the tables and the plots.

Why each preset and arm is what it is: the README of its results in docs/results/.
"""
