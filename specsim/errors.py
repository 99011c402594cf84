"""The one exception type that the CLI turns into a single line and exit status 2."""


class SpecsimError(ValueError):
    """Bad input: a malformed file, an unknown name, a value out of range.

    The message is one line, names what is wrong (file, field, allowed values) and is shown to
    the user as is.
    """
