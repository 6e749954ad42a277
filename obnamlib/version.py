"""The version of this implementation (shown by --version and in the log)."""

__version__ = '2.0.0'
