"""Names a user types, matched against the names a catalogue knows: "did you mean" for every catalogue.

One helper for every door that takes a name (hardware, engines, models, drafts, fields, options):

- ``resolve_name(given, known)``: the one known name ``given`` is safely taken for: itself, or the one
  whose spelling differs only in case and separators (``H100-SXM``, ``h100_sxm``, ``H100 SXM`` all mean
  ``h100-sxm``; ``vLLM`` means ``vllm``). A prefix or a near miss is never taken (``h100`` could be
  h100-sxm or h100-pcie; ``l40`` is a GPU of its own, not the ``l40s``), only suggested.
- ``nearest(given, known)``: the known names to suggest, closest first: those starting with ``given``
  (``a100`` -> a100-pcie-80gb, a100-sxm-40gb, a100-sxm-80gb), then difflib's close matches.
- ``did_you_mean(given, known)``: " (did you mean a, b?)" or "", to end a message of one's own.
- ``unknown(what, given, known)``: the one-line ``SpecsimError`` "unknown hardware 'A100' (did you
  mean a100-pcie-80gb, a100-sxm-40gb, a100-sxm-80gb?)", or the known names when nothing is close.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from specsim.errors import SpecsimError

#: At most this many suggestions; a catalogue at most this large is listed whole when nothing is close
MAX_SUGGESTIONS = 3
MAX_LISTED = 30
_SEPARATORS = re.compile(r"[\s_\-]+")


def normalised(name: str) -> str:
    """The spelling two names are compared in: case folded, separators (space, '_', '-') dropped."""
    return _SEPARATORS.sub("", name.strip().casefold())


def resolve_name(given: str, known: Iterable[str]) -> str | None:
    """The known name ``given`` means, or None: ``given`` itself when known, else the one known name
    equal to it in ``normalised`` spelling (None when no name or more than one is)."""
    names = list(dict.fromkeys(known))
    if given in names:
        return given
    key = normalised(given)
    if not key:
        return None
    same = [n for n in names if normalised(n) == key]
    return same[0] if len(same) == 1 else None


def nearest(given: str, known: Iterable[str], n: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to ``n`` known names closest to ``given``, in ``normalised`` spelling: the names that start
    with it (sorted), then those it starts with (longest first: ``H100-SXM5`` finds ``h100-sxm``), then
    those whose first word is its first word (``H100 80GB`` finds h100-pcie and h100-sxm), then
    difflib's close matches, best first (only very close ones when a name already matched by prefix)."""
    import difflib  # only when a name is unknown: not on every start

    names = list(dict.fromkeys(known))
    key = normalised(given)
    if not key or n <= 0:
        return []
    by_key: dict[str, list[str]] = {}
    for name in names:
        by_key.setdefault(normalised(name), []).append(name)
    longer = sorted(name for name in names if normalised(name).startswith(key))
    shorter = sorted((name for name in names if len(normalised(name)) >= 3 and key.startswith(normalised(name))
                      and name not in longer), key=lambda name: -len(normalised(name)))
    head = _SEPARATORS.split(given.strip().casefold())[0]  # "h100" of "H100 80GB": the same part, another spelling
    same_head = sorted((name for name in names if len(head) >= 3 and name not in longer and name not in shorter
                        and _SEPARATORS.split(name.casefold())[0] == head),
                       key=lambda name: (-difflib.SequenceMatcher(None, key, normalised(name)).ratio(), name))
    starts = longer + shorter + same_head
    cutoff = 0.8 if starts else 0.6
    close = [name for k in difflib.get_close_matches(key, list(by_key), n=n + len(starts), cutoff=cutoff)
             for name in by_key[k]]
    return list(dict.fromkeys([*starts, *close]))[:n]


def did_you_mean(given: str, known: Iterable[str], n: int = MAX_SUGGESTIONS) -> str:
    """" (did you mean a, b?)" for the nearest names, or "" when none is close (to end a message with)."""
    close = nearest(given, known, n)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def unknown(what: str, given: str, known: Iterable[str], *, where: str = "", also: str = "",
            listing: str = "") -> SpecsimError:
    """The error for a name no catalogue entry has, as one line:

    ``[WHERE: ]unknown WHAT 'GIVEN' (did you mean A, B?)``, or when nothing is close
    ``[WHERE: ]unknown WHAT 'GIVEN' (known: A, B, C[; ALSO])``; a catalogue longer than MAX_LISTED is
    not listed whole but pointed to by ``listing`` (a command, e.g. "specsim models list").
    ``also`` names what else is accepted there ("or a path to a YAML").

    >>> str(unknown("hardware", "h100", ["h100-sxm", "h100-pcie", "b200"]))
    "unknown hardware 'h100' (did you mean h100-pcie, h100-sxm?)"
    """
    names = list(dict.fromkeys(known))
    close = nearest(given, names)
    if close:
        hint = f"did you mean {', '.join(close)}?"
    else:
        if len(names) <= MAX_LISTED or not listing:
            hint = f"known: {', '.join(sorted(names))}" if names else "none is known"
        else:
            hint = f"{len(names)} known: {listing} lists them"
        hint += f"; {also}" if also else ""
    prefix = f"{where}: " if where else ""
    return SpecsimError(f"{prefix}unknown {what} {_quoted(given)} ({hint})")


def _quoted(text: str) -> str:
    """``text`` in quotes, control characters escaped (a name is echoed on one line)."""
    body = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return f"'{body}'"
