"""Rich consoles for tables that must not wrap where nobody resizes a terminal."""

from __future__ import annotations

import math
from typing import Any, Callable, TypeVar

Number = TypeVar("Number", int, float)

#: The ratios B/A (from 1/1000 to 1000) whose change ``change`` says as a percentage, as pyperf's
#: ``compare_to`` says a ratio it can: -99.9 % to +99,900.0 %; past them a percentage is a run of
#: digits or a -100.0 % that says B is nothing.
PERCENT_RATIOS = (1e-3, 1e3)
#: The largest magnitude ``fixed`` writes with its places (12 digits before the point).
FIXED_MOST = 1e12


def wide_console(min_width: int, stderr: bool = False, markup: bool = False) -> Any:
    """A rich Console: a terminal's own width, or at least ``min_width`` columns where the output
    is a log file, a pipe or CI (rich assumes 80 there and would cut or wrap a wide table); there
    a line of text longer than that stays one line (soft wrap), as grep and a log reader want it.
    What it prints is shown as it is, unless ``markup``: a table's cells are data (a failure's
    message with ``[/]`` in it was a MarkupError's traceback in ``runs list`` until 0.9.6, and
    ``[enforce fail at alloc_cpu.cpp:127]`` vanished from it as a tag)."""
    from rich.console import Console

    plain = {"highlight": False, "markup": markup, "emoji": markup}
    console = Console(stderr=stderr, **plain)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=max(console.width, min_width), soft_wrap=True, **plain)
    return console


def clipped(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters, its last one an ellipsis where it was cut (a C++
    template kernel's name runs to hundreds of characters)."""
    return text if len(text) <= chars else text[:chars - 1] + "…"


def whole_number(text: str) -> int | None:
    """``text`` of digits 0-9 alone as its number; None for anything else: a sign, blanks, digits that
    str.isdigit takes and int does not (``²``: a ValueError's traceback where isdigit guarded int) or that
    int reads in another script (``٣``, 3). The one test of a number written in a file's name, a tag or an
    argument (a CUDA index, a version, a pruning percentage, a batch size)."""
    return int(text) if text.isascii() and text.isdigit() else None


def decimal_number(text: str) -> float | None:
    """``text`` as float() reads it, in ASCII alone; None for anything else. float() takes digits and
    blanks of every script (``٣.5`` is 3.5, a full-width ``３`` 3; until 0.9.14 so did ``--ratios``,
    ``--under``, ``--device-priorities``, an ``MLFLOW_HTTP_REQUEST_*`` variable ...). Taken, as float()
    takes them: blanks around it, a sign, an exponent (``1e3``), underscores between digits
    (``1_000.5``), ``inf``, ``infinity`` and ``nan`` in any case; each caller keeps its own range
    (finite, above 0 ...). The one reading of a decimal written in an argument, the environment or a
    user's file."""
    return _ascii_number(float, text)


def integer_number(text: str) -> int | None:
    """``text`` as int() reads it, in ASCII alone (int takes ``٣`` as 3); None for anything else. Taken,
    as int() takes them: blanks around it, a sign and underscores between digits, for a caller whose own
    range says a negative one (``split index -2 is out of range``). A number in a name or tag, digits
    alone, is :func:`whole_number`'s."""
    return _ascii_number(int, text)


def _ascii_number(read: Callable[[str], Number], text: str) -> Number | None:
    """``read(text)`` (int or float) where ``text`` is ASCII and ``read`` takes it; else None."""
    if not text.isascii():
        return None
    try:
        return read(text)
    except ValueError:  # float() and int() raise nothing else of a string (a huge float is inf)
        return None


def counted(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, in the plural (``many``, else ``word`` + s) unless ``n`` is 1: ``1 row``, ``2 rows``."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def named(names: list[str]) -> str:
    """Names in one line, comma-joined, in the order given: one with a comma in it, blank, or
    with spaces at an end quoted, so that each reads as one (``a, b`` and ``'a, b'``)."""
    return ", ".join(repr(n) if "," in n or n != n.strip() or not n else n for n in names)


def per(value: float, word: str, unit: str) -> str:
    """A mean count per ``unit`` (``0.59 page faults per iteration``, ``1,204 page faults per
    step``): whole from 10 up, two significant digits under (``0`` said of 0.59 until 0.9.4)."""
    text = f"{value:,.0f}" if value >= 10 else f"{value:.2g}"
    return f"{text} {word if text == '1' else word + 's'} per {unit}"


def fixed(value: float, places: int = 3) -> str:
    """``value`` with ``places`` digits after the point (``12.500``) where that says it; one of more
    than 12 digits before the point (past ``FIXED_MOST``) or too small to show a digit there, in four
    significant digits (``1e+300``, ``1e-300``, ``0.0004``): a latency of 1e300 ms was 301 digits in
    ``runs list`` until 0.9.14, and one of 1e-300 ms ``0.000``, nothing."""
    if value == 0 or not math.isfinite(value) or 0.5 * 10 ** -places <= abs(value) < FIXED_MOST:
        return f"{value:.{places}f}"
    return f"{value:.{places + 1}g}"


def ratio_log10(a: float, b: float) -> float | None:
    """log10 of the ratio B/A of two finite numbers of one sign, worked out from their logarithms:
    finite where the float B/A overflows (1e300 / 1e-300: inf) or underflows (1e-300 / 1.7e308: 0.0).
    None where B/A is no such ratio: a zero, a sign change, an infinity or NaN."""
    if not (a and b and math.isfinite(a) and math.isfinite(b) and (a > 0) == (b > 0)):
        return None
    return math.log10(abs(b)) - math.log10(abs(a))


def float_ratio(a: float, b: float) -> float | None:
    """The float B/A where it is the ratio; None where A is 0 or NaN, or where it overflowed (inf) or
    underflowed (0.0 while B is not 0): :func:`ratio_log10` says those."""
    ratio = b / a if a else math.nan
    return ratio if math.isfinite(ratio) and (ratio or not b) else None


def relative_change(a: float, b: float) -> float | None:
    """The float B/A - 1 where it is the change from ``a`` to ``b``; None where :func:`float_ratio` is,
    and where it is -1.0 exactly while B is not 0 (B/A under a float's precision)."""
    ratio = float_ratio(a, b)
    if ratio is None or (ratio - 1.0 == -1.0 and b):
        return None
    return ratio - 1.0


def ratio_past_percent(a: float, b: float) -> str | None:
    """The ratio B/A of two finite numbers of one sign, in powers of ten (``1e+600x``, ``5.9e-609x``),
    where a percentage cannot say it (outside ``PERCENT_RATIOS``); None where one can (or where B/A is
    no such ratio: a zero, a sign change, an infinity, which :func:`change` says in per cent). The
    ratio is worked out from the logarithms, as the float B/A overflows (1e300 / 1e-300) or underflows
    (1e-300 / 1.7e308: 0.0, a "-100.0 %")."""
    power = ratio_log10(a, b)
    if power is None or PERCENT_RATIOS[0] <= b / a <= PERCENT_RATIOS[1]:
        return None
    exponent = math.floor(power)
    mantissa = round(10 ** (power - exponent), 1)
    if mantissa >= 10:  # 9.96 is 10: one power more
        mantissa, exponent = 1.0, exponent + 1
    return f"{mantissa:.2g}e{exponent:+03d}x"


def change(a: float, b: float) -> str:
    """The change from ``a`` to ``b`` as ``runs compare`` says it: a percentage (``+12.3 %``) where
    the ratio B/A is within ``PERCENT_RATIOS``, else that ratio in powers of ten (``1e+600x``: see
    :func:`ratio_past_percent`), where a percentage was ``+inf %`` or some 300 digits until 0.9.14, as
    pyperf's ``compare_to`` says a change as a ratio (``2.00x slower``). From 0: ``+0.0 %`` to 0,
    ``from 0`` to anything else (a ZeroDivisionError until 0.9.17; its callers keep from it)."""
    if a == 0:
        return "+0.0 %" if b == 0 else "from 0"
    return ratio_past_percent(a, b) or f"{100 * (b / a - 1.0):+.1f} %"


def shell_word(value: object) -> str:
    """``value`` as one word of a command a message suggests, to be pasted into a shell: quoted
    where it must be (a folder ``moved copy ü``, a name with a ``'`` or a ``$``), as it is where it
    need not (``runs``, ``/tmp/store``, ``http://host:5000``). Until 0.9.8 a path with a space
    was split into two words when pasted."""
    import shlex

    return shlex.quote(str(value))


def shell_line(*words: object) -> str:
    """The words of a command, each as :func:`shell_word` writes it, joined by spaces."""
    return " ".join(shell_word(w) for w in words)
