"""Errors that mean "the user gave us something we cannot use".

The CLI turns a UserError into one line on stderr and exit code 2, never a traceback.
"""


class UserError(Exception):
    """Bad input: profile, URL, model name, recording file, flag. Message is one line."""

    exit_code = 2


class RecordingError(UserError):
    """A file that is not a readable gpuscale-tui recording (missing, truncated, corrupt)."""


class RunFailed(Exception):
    """The run itself failed (server died, every level failed): exit code 1."""

    exit_code = 1
