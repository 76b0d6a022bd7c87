"""Resuming a state with another predictor names the differing settings briefly (issue 35:
a multi-KB parameter dump filled the one-line error)."""

from __future__ import annotations

import pytest

from pacpriv.exceptions import CheckpointError
from pacpriv.prediction import _state


def test_refusal_is_brief_and_names_settings(tmp_path):
    state = _state.StateDir(tmp_path / "state")
    stored = {"fit": {"estimator": "logistic", "params": {f"p{i}": "x" * 500 for i in range(30)}},
              "n_worlds": 8}
    state.write_config({"format": _state._FORMAT, "version": _state._VERSION,
                        "fingerprint": stored})
    new = {"fit": {"estimator": "ridge", "params": {f"p{i}": "y" * 500 for i in range(30)}},
           "n_worlds": 8}
    with pytest.raises(CheckpointError) as info:
        state.check_fingerprint(new)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 700, len(msg)
    assert "fit.estimator (state: 'logistic', now: 'ridge')" in msg
    assert "p0" not in msg  # another estimator: its parameters are not compared
    same = {"fit": {"estimator": "logistic", "params": new["fit"]["params"]}, "n_worlds": 8}
    with pytest.raises(CheckpointError) as info:
        state.check_fingerprint(same)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 700, len(msg)
    assert "fit.params.p0 (state: 'xxx" in msg
    assert "more" in msg  # the rest counted, not dumped
    assert "x" * 40 not in msg and "y" * 40 not in msg
