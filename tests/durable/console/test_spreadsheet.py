"""CSV cells a spreadsheet cannot run as formulas, whatever separator it splits them on (CSV injection)."""
import csv
import io

from hypothesis import given
from hypothesis import strategies as st

from durable.console.spreadsheet import FORMULA_STARTS, SEPARATORS, inert

DANGEROUS = tuple(FORMULA_STARTS) + ("\t", "\r")


def parts(cell: str) -> list[str]:
    """Every piece a spreadsheet might make of the cell, splitting on any separator it may use."""
    pieces = [cell]
    for separator in SEPARATORS:
        pieces = [piece for whole in pieces for piece in whole.split(separator)]
    return pieces


def test_the_attack_as_found_is_inert_after_the_separator():
    assert inert("x;=1+1") == "x;'=1+1"
    assert inert("=HYPERLINK(\"http://evil\")") == "'=HYPERLINK(\"http://evil\")"
    assert inert("ok, @SUM(A1)") == "ok, '@SUM(A1)"
    assert inert("plain reason") == "plain reason"


@given(st.text(alphabet=st.sampled_from(list("ab =+-@,;|\t\r\n'1")) | st.characters(), max_size=60))
def test_no_piece_of_a_cell_starts_a_formula(text):
    for piece in parts(inert(text)):
        assert not piece.lstrip(" ").startswith(DANGEROUS)


@given(st.lists(st.text(max_size=40), min_size=1, max_size=6))
def test_a_quoted_row_reads_back_field_for_field(fields):
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerow([inert(field) for field in fields])
    [row] = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert row == [inert(field) for field in fields]
