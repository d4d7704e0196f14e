"""The one base class of the errors a user can fix: binaries print them as one sentence."""


class UserError(ValueError):
    """Bad input (a flag value, a missing or malformed file); the message says what was wrong and what to do."""
