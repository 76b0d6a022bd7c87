"""The masks' memory refusal words counts of any size (``n_trials = 10**400`` raised an
``OverflowError`` while formatting its own message)."""

from __future__ import annotations

import pytest

from pacpriv.pac.engine._simulate import _check_memory
from pacpriv.pac.engine._storage import physical_memory


@pytest.mark.skipif(physical_memory() is None, reason="physical memory unknown")
@pytest.mark.parametrize("n_trials,shown", [
    (2**62, "4611686018427387904"),
    (10**400, "about 2^1328"),
    (10**5000, "about 2^16609"),  # beyond Python's 4,300-digit int-to-str limit
], ids=["2**62", "10**400", "10**5000"])
def test_huge_counts_are_refused_in_words(n_trials, shown):
    with pytest.raises(ValueError) as info:
        _check_memory(n_trials, 150, None)
    text = str(info.value)
    assert text.startswith(f"`n_trials` = {shown} with 150 records")
    assert "GiB for the membership masks alone" in text


def test_a_disk_backed_run_is_not_refused():
    assert _check_memory(10**400, 150, "outputs.npy") is None
