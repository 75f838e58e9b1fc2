"""How an option is declared: a dataclass field with its help text and valid values (no fairseq import).

The core dataclasses (``AssistantConfig``, ``SelectionOptions``, ``SelectionSchedule``) and the
runtime options declare each option once with ``option(...)``; ``fairseq_autoassist.options``
gathers them into the task's ``--autoassist-*`` flags and checks every value with one loop.
Fields declared without ``option`` (no help text) are set by the code, not by the user.
"""

from dataclasses import field, fields


def option(default, help, minimum=None, maximum=None, exclude_minimum=False, choices=None):
    """A dataclass field that is a user option: ``minimum``/``maximum`` bound a number (the minimum
    itself excluded when ``exclude_minimum``), ``choices`` (a callable, for registries filled
    later) lists the valid strings."""
    metadata = {"help": help, "minimum": minimum, "maximum": maximum, "exclude_minimum": exclude_minimum,
                "choices": choices}
    return field(default=default, metadata=metadata)


def option_fields(dataclass_type):
    """The fields of ``dataclass_type`` declared with ``option``."""
    return [f for f in fields(dataclass_type) if "help" in f.metadata]


def value_problem(value, metadata):
    """Why ``value`` is invalid for an option with ``metadata``, or None."""
    choices = metadata.get("choices")
    if choices is not None and value not in choices():
        return f"is unknown; choose one of {', '.join(choices())}"
    low, high = metadata.get("minimum"), metadata.get("maximum")
    if low is None and high is None:
        return None
    exclusive = metadata.get("exclude_minimum")
    below = low is not None and (value <= low if exclusive else value < low)
    above = high is not None and value > high
    if not (below or above):
        return None
    if high is None:
        return f"must be {'>' if exclusive else '>='} {low}"
    return f"is outside {'(' if exclusive else '['}{low}, {high}]"
