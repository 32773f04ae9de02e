"""JSON and TOML text read into Python values, every way the text cannot be read said in words as
one exception, :class:`Undecodable`, a ValueError.

json and tomllib raise four things for text they cannot read: their own decode error, a
UnicodeDecodeError (json given bytes), a RecursionError for arrays in arrays past Python's
recursion limit (``'[' * 100000``), and a plain ValueError for a whole number of more digits than
Python converts (4,300). Each reader of a user's file caught them one by one, in words of its own,
and those that caught a ValueError alone (an artifact, an outbox file, a cache entry) let the
RecursionError through as a traceback (until 0.9.15). A reader catches Undecodable, or any
ValueError, and says its own file around ``str(exc)``.
"""

from __future__ import annotations

from typing import Any

from tracker.errors import not_utf8


class Undecodable(ValueError):
    """Text that json or tomllib cannot read; ``str()`` says why in words, without the file's name:
    ``not JSON (Expecting value: line 1 column 1 (char 0))``, ``JSON nested too deeply to read``,
    ``a whole number of more than 4,300 digits (more than Python reads)``."""


def loads_json(text: str | bytes) -> Any:
    """``json.loads(text)``, or :class:`Undecodable` saying why it cannot be read."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Undecodable(f"not JSON ({exc})") from None
    except UnicodeDecodeError as exc:  # bytes not in the encoding json told by their first ones (UTF-8, -16 or -32)
        said = not_utf8(exc) if exc.encoding.startswith("utf-8") else (
            f"not {exc.encoding.upper()} text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r})")
        raise Undecodable(f"{said}; JSON is UTF-8 text") from None
    except RecursionError:  # arrays or objects in each other past Python's recursion limit
        raise Undecodable("JSON nested too deeply to read") from None
    except ValueError:  # none other than a number too long to convert (the two above are ValueErrors too)
        raise Undecodable(_too_many_digits()) from None


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, or :class:`Undecodable` saying why it cannot be read."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Undecodable(f"not valid TOML ({exc})") from None
    except RecursionError:  # tomllib nests arrays by recursion too
        raise Undecodable("TOML nested too deeply to read") from None
    except ValueError:  # none other than a number too long to convert (a TOMLDecodeError is one, caught above)
        raise Undecodable(_too_many_digits()) from None


def _too_many_digits() -> str:
    """What a file holding a whole number of more digits than Python converts (``sys.get_int_max_str_digits()``,
    4,300) holds, in words: json and tomllib raise it as a plain ValueError, which was the traceback of every
    reader of a campaign, job, search space, spec, mapping or COCO file until 0.9.14."""
    import sys

    return f"a whole number of more than {sys.get_int_max_str_digits():,} digits (more than Python reads)"
