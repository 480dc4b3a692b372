"""Cells a spreadsheet opens as text, never as a formula (CSV injection, OWASP's guidance).

A spreadsheet runs a cell that starts with = + - @ (or a tab or CR) as a formula. It may also
split a cell on a separator other than the file's own (a ';' or tab locale, a '|' import), so a
formula may start right after any separator inside a cell: "x;=1+1" becomes "x" and "=1+1".
Every such start gets a leading apostrophe, which the spreadsheet shows as text. The export is
for people to read; the apostrophes are the price of opening it safely.
"""
from __future__ import annotations

import re

FORMULA_STARTS = "=+-@"
SEPARATORS = ",;\t|\r\n"
# The start of the cell, or a separator, then any spaces, then a character a formula starts with.
_FORMULA_AFTER_SEPARATOR = re.compile(rf"(^|[{re.escape(SEPARATORS)}])([ ]*)([{re.escape(FORMULA_STARTS)}])")


def inert(value: str) -> str:
    """`value` with every place a spreadsheet could start a formula made text."""
    if value[:1] in ("\t", "\r"):
        value = "'" + value
    return _FORMULA_AFTER_SEPARATOR.sub(r"\1\2'\3", value)
