"""The report names the pacpriv version that ran (it read the installed metadata, which an
older install shadowed by a checkout reported as 0.2.0)."""

from __future__ import annotations

from importlib import metadata

import pacpriv
from pacpriv.report import builder


def test_versions_name_the_running_pacpriv(monkeypatch):
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.0-stale")
    versions = builder._versions()
    assert versions["pacpriv"] == pacpriv.__version__
    assert versions["numpy"] == "0.0.0-stale"  # other packages: their installed metadata
    assert set(versions) == {"python", *builder._PACKAGES}
