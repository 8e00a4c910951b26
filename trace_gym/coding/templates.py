"""The pieces a coding task's package is built from: module templates, their functions, each
function's bug catalogue and its input drawer.

A function template is its correct source (with `@NAME@` placeholders for the constants a
seed chooses), the bugs that can be injected into it (an exact, whole-line replacement of
part of that source, each changing what the function returns on some inputs), and a drawer
of argument lists that reaches the inputs where the bugs show (a length equal to a width,
a total equal to a threshold, touching intervals). `trace_gym.coding.repo` assembles a
package from these and checks, per seed, that the injected bug shows on the inputs it picks.

Bug kinds (the catalogue SWE-bench-style issues come from): off-by-one, wrong comparison,
swapped arguments, missing edge case, wrong default, mutated constant, wrong operator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trace_gym.rng import Rng

BUG_KINDS = ("off_by_one", "wrong_comparison", "swapped_arguments", "missing_edge_case",
             "wrong_default", "mutated_constant", "wrong_operator")
"""Every kind of bug the catalogue holds."""


@dataclass(frozen=True)
class Bug:
    """One injectable bug: replace `old` (whole lines of the function's source, after its
    constants are filled in) with `new` (zero or more whole lines)."""

    kind: str
    old: str
    new: str


@dataclass(frozen=True)
class FunctionTemplate:
    """One function of a module template."""

    name: str
    source: str
    """The correct source, `@NAME@` placeholders for the seed's constants."""
    bugs: tuple[Bug, ...]
    draw: Callable[[Rng, dict[str, Any]], list[Any]]
    """An argument list (JSON values) for the function, given the seed's constants."""
    expectation: str
    """What the function should do, as a user who read its docstring says it."""
    uses: tuple[str, ...] = ()
    """Functions of other modules it calls (their modules are imported by the module)."""


@dataclass(frozen=True)
class ModuleTemplate:
    """One module of a package: a docstring, its imports and its functions."""

    name: str
    doc: str
    header: str
    """Standard-library imports (may be empty)."""
    functions: tuple[FunctionTemplate, ...]


CONSTANTS: dict[str, tuple[Any, ...]] = {
    "WIDTH": (8, 10, 12, 16),
    "DIGITS": (1, 2, 3),
    "THRESHOLD": (50, 100, 200),
    "DISCOUNT": (10, 15, 20, 25),
    "SEP": ("-", "_"),
    "MINUTE": (60,),
}
"""Placeholder -> the values a seed chooses from."""


def _ints(rng: Rng, n: int, low: int, high: int) -> list[int]:
    return [rng.integer(low, high) for _ in range(n)]


_WORDS = ("alpha", "Beta", "gamma", "Delta", "red", "Blue", "green", "tea", "Cup", "sun", "moon", "Star")


def _text(rng: Rng, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


# -- mathops ------------------------------------------------------------------------------

CLAMP = FunctionTemplate(
    name="clamp",
    source='''def clamp(value, low, high):
    """Return value limited to the closed range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
''',
    bugs=(
        Bug("missing_edge_case", "    if value > high:\n        return high\n", ""),
        Bug("wrong_comparison", "    if value < low:\n", "    if value > low:\n"),
    ),
    draw=lambda rng, c: (lambda lo: [rng.integer(lo - 30, lo + 60), lo, lo + rng.integer(1, 30)])(
        rng.integer(-40, 40)),
    expectation="it should return the value limited to the range [low, high]",
)

PERCENT = FunctionTemplate(
    name="percent",
    source='''def percent(part, whole, digits=@DIGITS@):
    """part as a percentage of whole, rounded to `digits` places; ValueError when whole is 0."""
    if whole == 0:
        raise ValueError("whole must not be zero")
    return round(100 * part / whole, digits)
''',
    bugs=(
        Bug("missing_edge_case", '    if whole == 0:\n        raise ValueError("whole must not be zero")\n', ""),
        Bug("wrong_operator", "    return round(100 * part / whole, digits)\n",
            "    return round(100 * part // whole, digits)\n"),
    ),
    draw=lambda rng, c: [rng.integer(1, 99), 0 if rng.chance(0.3) else rng.integer(3, 97)],
    expectation="it should give part as a percentage of whole, and raise ValueError when whole is 0",
)

MEAN = FunctionTemplate(
    name="mean",
    source='''def mean(values):
    """The arithmetic mean of a non-empty list of numbers; ValueError for an empty one."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
''',
    bugs=(
        Bug("off_by_one", "    return sum(values) / len(values)\n", "    return sum(values[1:]) / len(values)\n"),
        Bug("off_by_one", "    return sum(values) / len(values)\n", "    return sum(values) / (len(values) + 1)\n"),
    ),
    draw=lambda rng, c: [_ints(rng, rng.integer(1, 6), -20, 40)],
    expectation="it should return the arithmetic mean of the values",
)

RUNNING_TOTAL = FunctionTemplate(
    name="running_total",
    source='''def running_total(values):
    """The list of prefix sums: element i is the sum of values[0..i]."""
    totals = []
    acc = 0
    for i in range(len(values)):
        acc += values[i]
        totals.append(acc)
    return totals
''',
    bugs=(
        Bug("off_by_one", "    for i in range(len(values)):\n", "    for i in range(1, len(values)):\n"),
        Bug("wrong_operator", "        acc += values[i]\n", "        acc = values[i]\n"),
    ),
    draw=lambda rng, c: [_ints(rng, rng.integer(2, 6), -9, 30)],
    expectation="element i of the result should be the sum of the first i + 1 values",
)

# -- textops ------------------------------------------------------------------------------

TRUNCATE = FunctionTemplate(
    name="truncate",
    source='''def truncate(text, width=@WIDTH@, suffix="..."):
    """text cut to at most `width` characters, ending with `suffix` when it was cut."""
    if len(text) <= width:
        return text
    return text[: width - len(suffix)] + suffix
''',
    bugs=(
        Bug("wrong_comparison", "    if len(text) <= width:\n", "    if len(text) < width:\n"),
        Bug("off_by_one", "    return text[: width - len(suffix)] + suffix\n",
            "    return text[: width - len(suffix) + 1] + suffix\n"),
    ),
    draw=lambda rng, c: ["abcdefghijklmnopqrstuvwxyz"[: c["WIDTH"] + rng.integer(-2, 3)]],
    expectation="the result should be at most `width` characters long, and only cut text ends with the suffix",
)

SLUGIFY = FunctionTemplate(
    name="slugify",
    source='''def slugify(text, sep="@SEP@"):
    """Lower-case words of text (letters and digits only) joined by `sep`."""
    words = re.findall(r"[A-Za-z0-9]+", text)
    return sep.join(word.lower() for word in words)
''',
    bugs=(
        Bug("wrong_default", '''def slugify(text, sep="@SEP@"):\n''', '''def slugify(text, sep=" "):\n'''),
        Bug("missing_edge_case", "    return sep.join(word.lower() for word in words)\n",
            "    return sep.join(words)\n"),
    ),
    draw=lambda rng, c: [_text(rng, rng.integer(2, 4)) + rng.choice(("", "!", " 2024"))],
    expectation="it should join the lower-cased words with the separator",
)

COUNT_WORDS = FunctionTemplate(
    name="count_words",
    source='''def count_words(text):
    """How often each word occurs in text, ignoring case: {word: count}."""
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts
''',
    bugs=(
        Bug("missing_edge_case", "    for word in text.lower().split():\n", "    for word in text.split():\n"),
        Bug("off_by_one", "        counts[word] = counts.get(word, 0) + 1\n",
            "        counts[word] = counts.get(word, 1) + 1\n"),
    ),
    draw=lambda rng, c: [_text(rng, rng.integer(3, 6))],
    expectation="it should count each word once per occurrence, ignoring case",
)

# -- parsing ------------------------------------------------------------------------------

PARSE_DURATION = FunctionTemplate(
    name="parse_duration",
    source='''UNITS = {"h": 60 * @MINUTE@, "m": @MINUTE@, "s": 1}


def parse_duration(text):
    """Seconds in a duration such as "1h30m" or "45s"; ValueError for anything else."""
    total = 0
    for amount, unit in re.findall(r"(\\d+)([hms])", text):
        total += int(amount) * UNITS[unit]
    if not re.fullmatch(r"(\\d+[hms])+", text):
        raise ValueError(f"not a duration: {text!r}")
    return total
''',
    bugs=(
        Bug("mutated_constant", 'UNITS = {"h": 60 * @MINUTE@, "m": @MINUTE@, "s": 1}\n',
            'UNITS = {"h": 100 * @MINUTE@, "m": @MINUTE@, "s": 1}\n'),
        Bug("missing_edge_case", '    if not re.fullmatch(r"(\\d+[hms])+", text):\n        raise ValueError(f"not a duration: {text!r}")\n', ""),
    ),
    draw=lambda rng, c: [rng.choice((f"{rng.integer(1, 99)}", f"{rng.integer(1, 9)}x", f"h{rng.integer(1, 9)}",
                                     f"{rng.integer(1, 9)}h{rng.integer(1, 9)}")) if rng.chance(0.3)
                         else "".join(f"{rng.integer(1, 9)}{u}" for u in ("h", "m", "s") if rng.chance(0.6)) or "5s"],
    expectation="it should give the number of seconds in the duration, and raise ValueError for anything else",
)

PARSE_PAIRS = FunctionTemplate(
    name="parse_pairs",
    source='''def parse_pairs(text):
    """A dict from "key=value;key=value" text; a value may itself contain "="."""
    pairs = {}
    for item in text.split(";"):
        if not item:
            continue
        key, _, value = item.partition("=")
        pairs[key.strip()] = value.strip()
    return pairs
''',
    bugs=(
        Bug("wrong_operator", '        key, _, value = item.partition("=")\n',
            '        key, _, value = item.rpartition("=")\n'),
        Bug("missing_edge_case", "        if not item:\n            continue\n", ""),
    ),
    draw=lambda rng, c: [";".join(f"{rng.choice(_WORDS).lower()}={rng.integer(0, 9)}"
                                  + ("=x" if rng.chance(0.4) else "") for _ in range(rng.integer(1, 3)))
                         + (";" if rng.chance(0.4) else "")],
    expectation="it should map each key to the text after its first '='",
)

# -- orders (data classes) ------------------------------------------------------------------

ORDER_TOTAL = FunctionTemplate(
    name="order_total",
    source='''class Line(NamedTuple):
    """One order line: a unit price in cents and a quantity."""

    price: int
    quantity: int

    @property
    def cost(self):
        return self.price * self.quantity


def order_total(rows, threshold=@THRESHOLD@):
    """Total in cents of [[price, quantity], ...]; @DISCOUNT@% off when it reaches `threshold`."""
    lines = [Line(price, quantity) for price, quantity in rows]
    total = sum(line.cost for line in lines)
    if total >= threshold:
        total -= total * @DISCOUNT@ // 100
    return total
''',
    bugs=(
        Bug("wrong_comparison", "    if total >= threshold:\n", "    if total > threshold:\n"),
        Bug("mutated_constant", "        total -= total * @DISCOUNT@ // 100\n", "        total -= total * @DISCOUNT@ // 10\n"),
    ),
    draw=lambda rng, c: [[[c["THRESHOLD"] // k, k]] if rng.chance(0.4) and c["THRESHOLD"] % (k := rng.integer(1, 5)) == 0
                         else [[rng.integer(1, 60), rng.integer(1, 4)] for _ in range(rng.integer(1, 3))]],
    expectation="it should total price times quantity, less the discount once the total reaches the threshold",
)

# -- algos --------------------------------------------------------------------------------

BINARY_SEARCH = FunctionTemplate(
    name="binary_search",
    source='''def binary_search(items, target):
    """The index of target in the sorted list items, or -1 when it is absent."""
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
''',
    bugs=(
        Bug("off_by_one", "    lo, hi = 0, len(items) - 1\n", "    lo, hi = 0, len(items) - 2\n"),
        Bug("wrong_comparison", "    while lo <= hi:\n", "    while lo < hi:\n"),
    ),
    draw=lambda rng, c: (lambda items: [items, rng.choice(items) if rng.chance(0.8) else 1000])(
        sorted({rng.integer(0, 99) for _ in range(rng.integer(1, 7))})),
    expectation="it should return the index of the target, or -1 only when it is absent",
)

MERGE_INTERVALS = FunctionTemplate(
    name="merge_intervals",
    source='''def merge_intervals(intervals):
    """Overlapping or touching [start, end] intervals merged, sorted by start."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
''',
    bugs=(
        Bug("wrong_comparison", "        if merged and start <= merged[-1][1]:\n",
            "        if merged and start < merged[-1][1]:\n"),
        Bug("missing_edge_case", "            merged[-1][1] = max(merged[-1][1], end)\n",
            "            merged[-1][1] = end\n"),
    ),
    draw=lambda rng, c: [[(lambda s: [s, s + rng.integer(0, 6)])(rng.integer(0, 20)) for _ in range(rng.integer(2, 4))]],
    expectation="it should merge every pair of intervals that overlap or touch",
)

CHUNKS = FunctionTemplate(
    name="chunks",
    source='''def chunks(items, size):
    """items split into lists of `size` (the last may be shorter)."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[i : i + size] for i in range(0, len(items), size)]
''',
    bugs=(
        Bug("off_by_one", "    return [items[i : i + size] for i in range(0, len(items), size)]\n",
            "    return [items[i : i + size] for i in range(0, len(items) - 1, size)]\n"),
        Bug("missing_edge_case", '    if size < 1:\n        raise ValueError("size must be at least 1")\n', ""),
    ),
    draw=lambda rng, c: [list(range(rng.integer(1, 7))), rng.integer(-1, 3)],
    expectation="it should split the items into lists of `size`, the last one possibly shorter",
)

# -- report (calls the others: a bug below shows through it) ----------------------------------

SUMMARY = FunctionTemplate(
    name="summary",
    source='''def summary(values):
    """count, mean and running totals of a non-empty list of numbers."""
    return {"count": len(values), "mean": mathops.mean(values), "totals": mathops.running_total(values)}
''',
    bugs=(
        Bug("wrong_operator", '    return {"count": len(values), "mean": mathops.mean(values), '
            '"totals": mathops.running_total(values)}\n',
            '    return {"count": len(values) - 1, "mean": mathops.mean(values), '
            '"totals": mathops.running_total(values)}\n'),
    ),
    draw=lambda rng, c: [_ints(rng, rng.integer(1, 5), -9, 30)],
    expectation="it should give the count, the mean and the running totals of the values",
    uses=("mean", "running_total"),
)

BOUNDED = FunctionTemplate(
    name="bounded_scores",
    source='''def bounded_scores(scores, low, high):
    """Every score limited to [low, high]."""
    return [mathops.clamp(score, low, high) for score in scores]
''',
    bugs=(
        Bug("swapped_arguments", "    return [mathops.clamp(score, low, high) for score in scores]\n",
            "    return [mathops.clamp(score, high, low) for score in scores]\n"),
    ),
    draw=lambda rng, c: (lambda lo: [_ints(rng, rng.integer(1, 4), lo - 20, lo + 40), lo, lo + rng.integer(1, 20)])(
        rng.integer(-20, 20)),
    expectation="every score should be limited to the range [low, high]",
    uses=("clamp",),
)

SHORT_TITLES = FunctionTemplate(
    name="short_titles",
    source='''def short_titles(titles, width=@WIDTH@):
    """Each title as a slug cut to `width` characters."""
    return [textops.truncate(textops.slugify(title), width) for title in titles]
''',
    bugs=(
        Bug("swapped_arguments", "    return [textops.truncate(textops.slugify(title), width) for title in titles]\n",
            "    return [textops.slugify(textops.truncate(title, width)) for title in titles]\n"),
    ),
    draw=lambda rng, c: [[_text(rng, rng.integer(1, 4)) for _ in range(rng.integer(1, 3))]],
    expectation="each title should become its slug, cut to the width",
    uses=("truncate", "slugify"),
)

MODULES: tuple[ModuleTemplate, ...] = (
    ModuleTemplate("mathops", "Small arithmetic helpers.", "", (CLAMP, PERCENT, MEAN, RUNNING_TOTAL)),
    ModuleTemplate("textops", "Text helpers: cutting, slugs and word counts.", "import re\n",
                   (TRUNCATE, SLUGIFY, COUNT_WORDS)),
    ModuleTemplate("parsing", "Parsers for small text formats.", "import re\n", (PARSE_DURATION, PARSE_PAIRS)),
    ModuleTemplate("orders", "Order lines and totals.", "from typing import NamedTuple\n", (ORDER_TOTAL,)),
    ModuleTemplate("algos", "Small algorithms over lists.", "", (BINARY_SEARCH, MERGE_INTERVALS, CHUNKS)),
    ModuleTemplate("report", "Reports built from the other modules.", "", (SUMMARY, BOUNDED, SHORT_TITLES)),
)
"""Every module template, in the order a package lists them."""

FUNCTIONS: dict[str, tuple[ModuleTemplate, FunctionTemplate]] = {
    f.name: (m, f) for m in MODULES for f in m.functions}
"""Function name -> its module and template (names are unique across modules)."""


def fill(text: str, constants: dict[str, Any]) -> str:
    """`text` with each `@NAME@` replaced by the seed's constant."""
    for name, value in constants.items():
        text = text.replace(f"@{name}@", str(value))
    return text
