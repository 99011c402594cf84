"""The exception types the CLI maps to exit statuses, and those statuses.

Exit statuses (README, "One CLI vocabulary"): 0 ok, 1 a check failed (``validate``), 2 bad input
(any ``SpecsimError``), 3 an internal error (anything else: a bug, reported as one line).
"""

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3

#: Where internal errors should be reported (printed with every internal error).
ISSUE_TRACKER = "the specsim issue tracker"  # the lead sets the URL once the project has a public one


class SpecsimError(ValueError):
    """Bad input: a malformed file, an unknown name, a value out of range.

    The message is one line, names what is wrong (file, field, allowed values) and is shown to
    the user as is.
    """
