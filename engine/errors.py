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


# The pip extras of gpuscale-tui (pyproject.toml): the modules each feature imports, and the
# distribution to name for the first of them that is missing. The core (a client of a remote
# server) needs none of them.
EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "server": (("pytriton", "nvidia-pytriton"),),
    "probe": (("torch", "torch"), ("scipy", "scipy")),
    "model": (("torch", "torch"), ("onnx", "onnx")),
    "data": (("PIL", "pillow"),),
}


def missing_extra(extra: str, feature: str) -> str | None:
    """One line naming the extra to install when a module ``feature`` needs is absent, else None.
    Looks the modules up without importing them."""
    from importlib.util import find_spec

    for module, dist in EXTRAS[extra]:
        if find_spec(module) is None:
            return f"{feature} needs {dist}: pip install 'gpuscale-tui[{extra}]'"
    return None


def require_extra(extra: str, feature: str) -> None:
    """Raise a UserError (one line, exit code 2) when ``extra`` is not installed."""
    if line := missing_extra(extra, feature):
        raise UserError(line)
