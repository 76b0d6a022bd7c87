"""Package list for setuptools: every ``pacpriv*`` package, plus the top-level ``mechanisms/``
folder installed as ``pacpriv.mechanisms`` (nothing called plain ``mechanisms`` is installed).
All other metadata is in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["pacpriv", "pacpriv.*"]), "pacpriv.mechanisms"],
    package_dir={"pacpriv.mechanisms": "mechanisms"},
    package_data={"pacpriv": ["py.typed"]},
)
