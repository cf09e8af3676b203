"""One exception type for every error a user can fix: the message is one sentence naming the input and the fix.

The CLI and the rule scripts print ``str(error)`` alone (no traceback), so the message must stand on its own.
"""


class RooflowError(Exception):
    """An error caused by the user's input (config, file, environment), with a message that says what to do."""


class ParseError(RooflowError):
    """A profiler output file that is not in any accepted shape, truncated, or reports a profiler error."""
