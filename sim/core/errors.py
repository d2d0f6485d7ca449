"""Errors the CLI turns into a one-line message and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: a name, a value, a file or a URL. Nothing was written."""


class ModelLoadError(UsageError):
    """A model named by the user cannot be loaded: bad input, even when found only at first use."""


class RunTaken(UsageError):
    """Another process has the run: it created the row first (a sweep started twice) or took it over meanwhile."""
