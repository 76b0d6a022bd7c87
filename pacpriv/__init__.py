"""pacpriv: measure and control how much a data-processing function leaks about its records."""

__version__ = "0.1.0"
