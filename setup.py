"""Package list for setuptools: every ``pacpriv*`` package. The reference mechanisms live in the
top-level folder ``mechanisms/``; ``pacpriv/mechanisms`` is a relative symbolic link to it, so
they import as ``pacpriv.mechanisms`` from a checkout and from the wheel (which holds a real
``pacpriv/mechanisms/`` folder and nothing called plain ``mechanisms``). All other metadata is
in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["pacpriv", "pacpriv.*"]),
    package_data={"pacpriv": ["py.typed"]},
)
