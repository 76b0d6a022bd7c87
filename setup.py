"""Package list for setuptools: every ``pacpriv*`` package, the reference mechanisms
(``pacpriv/mechanisms/``, a plain package that imports no other pacpriv module) included. All
other metadata is in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["pacpriv", "pacpriv.*"]),
    package_data={"pacpriv": ["py.typed"]},
)
