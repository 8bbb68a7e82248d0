"""Errors that reach the user: each names the file, the key or line, the value and what is
allowed."""


class GicommError(Exception):
    """Base of all errors gicomm reports to users without a traceback."""


class ConfigError(GicommError):
    """A configuration file or value is invalid."""


class RecordError(GicommError):
    """A raw record file is malformed, truncated or of another schema version."""


class BuildError(GicommError):
    """The native build lacks a program the campaign needs (a misspelled driver, a failed or
    partial build): not a property of the host, so never recorded as a skipped point."""
