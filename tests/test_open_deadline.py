"""WORKBENCH_OPEN_DEADLINE_S (ui/opening.py): how long a shared link's page may take to build. A
value that is not a positive finite number of seconds is not a deadline: the default stands."""

from __future__ import annotations

import pytest

from workbench.ui.opening import OPEN_DEADLINE_S, deadline_s


@pytest.mark.parametrize("value", ["", "abc", "-1", "0", "nan", "inf", "-inf", "1e999", "0x10", " "])
def test_a_bad_value_leaves_the_default(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_OPEN_DEADLINE_S", value)
    assert deadline_s() == OPEN_DEADLINE_S


@pytest.mark.parametrize("value, seconds", [("2.5", 2.5), ("0.5", 0.5), (" 90 ", 90.0), ("1e3", 1000.0)])
def test_a_positive_number_of_seconds_is_the_deadline(value: str, seconds: float,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_OPEN_DEADLINE_S", value)
    assert deadline_s() == seconds != OPEN_DEADLINE_S


def test_unset_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_OPEN_DEADLINE_S", raising=False)
    assert deadline_s() == OPEN_DEADLINE_S == 60
