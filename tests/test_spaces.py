"""Action spaces: construction checks and validation."""

import pytest

from sim.core.spaces import Choice, Form, Number, SpaceError, Text


def test_choice_rejects_empty_and_duplicate_options():
    """A Choice without options, or with repeated ones, is refused at construction."""
    with pytest.raises(SpaceError):
        Choice([])
    with pytest.raises(SpaceError):
        Choice(["a", "a"])


def test_choice_validate_is_case_insensitive_but_strict():
    """Options match regardless of case; anything else is refused."""
    c = Choice(["Cooperate", "defect"])
    assert c.validate("cooperate") == "Cooperate"
    with pytest.raises(SpaceError):
        c.validate("maybe")


def test_number_snaps_to_grid_and_refuses_out_of_range():
    """Numbers round to the step grid; values outside [lo, hi] are refused."""
    n = Number(0, 10, 1)
    assert n.validate("3.4") == 3.0
    assert n.validate(9.6) == 10.0
    with pytest.raises(SpaceError):
        n.validate(11)
    with pytest.raises(SpaceError):
        n.validate("lots")
    assert Number(0, 1, 0.25).grid() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_form_validates_every_field():
    """A Form needs every field, each valid in its own space."""
    f = Form({"amount": Number(0, 5), "to": Choice(["a", "b"]), "note": Text(10)})
    assert f.validate({"amount": 2, "to": "b", "note": " hi "}) == {"amount": 2.0, "to": "b", "note": "hi"}
    with pytest.raises(SpaceError):
        f.validate({"amount": 2, "to": "c", "note": ""})
    with pytest.raises(SpaceError):
        f.validate({"amount": 2})


def test_snap_accepts_ints_and_returns_floats():
    """An engine may hand an int: snapping it neither fails nor leaks an int into the record."""
    from sim.core.spaces import Number

    for space in (Number(0, 100, 1), Number(0, 100.0, 1), Number(0.5, 10, 1), Number(0, 10, 0.5)):
        for x in (55, 0, 100, -3, 1000):
            got = space.snap(x)
            assert isinstance(got, float)
            assert space.lo <= got <= space.hi
    assert Number(0, 100, 1).snap(55) == 55.0
    assert Number(0.5, 10, 1).snap(3) == 3.5  # nearest grid point of 0.5 + k
