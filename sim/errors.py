"""Errors the CLI turns into a one-line message and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: a name, a value, a file or a URL. Nothing was written."""
