"""Edits of a YAML text that keep everything else byte for byte (comments, order, layout, quoting).

:class:`YamlTextEdits` composes the text with PyYAML (nodes with character marks, no Python
objects), collects replacements and insertions at the places the nodes mark, and applies them at
once (``mbfg tune`` writes its tuned noises into a copy of the user's config this way).
:func:`float_text` writes a float that YAML 1.1 readers take as a number.
"""
from __future__ import annotations

import re

import yaml


def float_text(x: float) -> str:
    """A float as YAML 1.1 readers (PyYAML) take it: 1e-05 is a string there, 1.0e-05 a number."""
    t = repr(float(x))
    if "e" in t:
        mant, exp = t.split("e")
        t = (mant if "." in mant else mant + ".0") + "e" + exp
    return t


class YamlTextEdits:
    """Edits of a YAML text at the places PyYAML's composer marks (character indices), so that
    everything else (comments, order, layout, quoting) stays byte for byte."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        self.edits: list[tuple[int, int, str]] = []

    @staticmethod
    def get(node, key: str):
        """The value node of ``key`` in a mapping node (None if absent or not a mapping)."""
        if node is None or node.tag != "tag:yaml.org,2002:map":
            return None
        for k, v in node.value:
            if k.value == key:
                return v
        return None

    def replace(self, node, text: str) -> None:
        """Replace a scalar; a comment after it on its line keeps its column when there is room."""
        a, b = node.start_mark.index, node.end_mark.index
        pad = re.match(r"( +)#", self.text[b:b + 200])
        if pad:
            width = b - a + len(pad.group(1))
            text, b = text + " " * max(1, width - len(text)), b + len(pad.group(1))
        self.edits.append((a, b, text))

    def insert(self, mapping, key: str, text: str) -> None:
        """Add ``key: text`` to a mapping node (block or flow style)."""
        if mapping.flow_style:
            close = self.text.rindex("}", 0, mapping.end_mark.index)
            sep = ", " if mapping.value else ""
            self.edits.append((close, close, f"{sep}{key}: {text}"))
            return
        column = mapping.value[0][0].start_mark.column
        end = mapping.value[-1][1].end_mark
        if end.column == 0:          # a nested block ends at the start of the next line
            at, new = end.index, " " * column + f"{key}: {text}\n"
        else:
            nl = self.text.find("\n", end.index)
            at = len(self.text) if nl < 0 else nl
            new = "\n" + " " * column + f"{key}: {text}"
        self.edits.append((at, at, new))

    def append(self, text: str) -> None:
        at = len(self.text)
        self.edits.append((at, at, ("" if self.text.endswith("\n") else "\n") + text))

    def result(self) -> str:
        out = self.text
        # from the end, so that earlier indices stay valid; insertions at one place keep their order
        order = sorted(range(len(self.edits)), key=lambda i: (self.edits[i][0], self.edits[i][1], i), reverse=True)
        for i in order:
            a, b, new = self.edits[i]
            out = out[:a] + new + out[b:]
        return out


def yaml_number(node) -> float | None:
    """The number a scalar node holds (an int or float tag), else None."""
    try:
        return float(node.value) if node is not None and node.tag in (
            "tag:yaml.org,2002:float", "tag:yaml.org,2002:int") else None
    except ValueError:
        return None
