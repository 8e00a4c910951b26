"""The pieces a coding task's package is built from: module templates, their functions,
each function's input drawer, and the names a seed may give each identifier.

A function template is its correct source (with `@NAME@` placeholders for the constants a
seed chooses) and a drawer of argument lists that reaches the inputs where a bug would show
(a length equal to a width, a total equal to a threshold, touching intervals). The bug is
not part of the template: `trace_gym.coding.mutate` injects it at a random site of the
function's syntax tree, and `trace_gym.coding.repo` keeps it only when it shows on the
inputs it draws.

Against memorisation, each seed also renames (`NAMES`: every module, function, parameter
and local has a pool of names, no name in two pools) and restyles the code, and
`held_out` templates appear only in the packages of test seeds, so a program that learnt
the train packages by heart has never seen their correct text. Most templates also have a
knob (`KNOBS`): behaviour a seed chooses (a discount when the total reaches or exceeds a
threshold, words counted with or without case) and its docstring states. A bug may be the
code of another value under the seed's words, so knowing every template by heart does not
tell a correct function from a buggy one: the docstring and the issue do.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trace_gym.rng import Rng


@dataclass(frozen=True)
class FunctionTemplate:
    """One function of a module template."""

    name: str
    """Its canonical name (a key of `NAMES`; the package names it as the seed chose)."""
    source: str
    """The correct source, `@NAME@` placeholders for the seed's constants; it may define a
    module-level constant or class before the function (part of the template's bug sites)."""
    draw: Callable[[Rng, dict[str, Any]], list[Any]]
    """An argument list (JSON values) for the function, given the seed's constants."""
    expectation: str
    """What the function should do, as a user who read its docstring says it."""
    uses: tuple[str, ...] = ()
    """Functions it calls (canonical names; another module's are reached through it)."""
    held_out: bool = False
    """Only in the packages of test seeds (never seen in training)."""


@dataclass(frozen=True)
class ModuleTemplate:
    """One module of a package: a docstring, its imports and its functions."""

    name: str
    doc: str
    header: str
    """Standard-library imports (may be empty)."""
    functions: tuple[FunctionTemplate, ...]


CONSTANTS: dict[str, tuple[Any, ...]] = {
    "WIDTH": (8, 10, 12, 14, 16, 20),
    "DIGITS": (1, 2, 3),
    "THRESHOLD": (50, 80, 100, 150, 200, 250),
    "DISCOUNT": (5, 10, 15, 20, 25, 30),
    "SEP": ("-", "_"),
    "MINUTE": (60,),
}
"""Placeholder -> the values a seed chooses from."""


@dataclass(frozen=True)
class Knob:
    """One behaviour a seed may give a template: code, and the words that say it."""

    code: str
    """Replaces `@NAME@` in the template's code."""
    doc: str
    """Replaces `@NAME_DOC@` (its docstring's words) and is what the issue's user expects."""
    kind: str
    """The bug kind (`trace_gym.coding.mutate.BUG_KINDS`) of code with another value under
    this value's words."""


KNOBS: dict[str, tuple[Knob, ...]] = {
    "REACH": (Knob(">=", "reaches", "wrong_comparison"), Knob(">", "exceeds", "wrong_comparison")),
    "TOUCH": (Knob("<=", "overlap or touch", "wrong_comparison"),
              Knob("<", "overlap (touching ones stay apart)", "wrong_comparison")),
    "CASE": (Knob("text.lower()", "ignoring case", "missing_edge_case"),
             Knob("text", "case-sensitively", "missing_edge_case")),
    "CHARS": (Knob("[A-Za-z0-9]+", "letters and digits", "mutated_constant"),
              Knob("[A-Za-z]+", "letters only, digits dropped", "mutated_constant")),
    "SPLIT": (Knob("partition", "its first", "swapped_arguments"), Knob("rpartition", "its last", "swapped_arguments")),
    "CUT": (Knob("width - len(suffix)", "at most `width` characters, `suffix` included", "off_by_one"),
            Knob("width", "its first `width` characters, then `suffix`", "off_by_one")),
    "ZERO": (Knob('raise ValueError("whole must not be zero")', "raise ValueError", "missing_edge_case"),
             Knob("return 0", "give 0", "missing_edge_case")),
    "LAST": (Knob("len(items)", "the last may be shorter", "off_by_one"),
             Knob("len(items) - size + 1", "a shorter last one is dropped", "off_by_one")),
    "ROTATE": (Knob("items[steps:] + items[:steps]", "left", "swapped_arguments"),
               Knob("items[-steps:] + items[:-steps]", "right", "swapped_arguments")),
    "END": (Knob("high + 1", "both ends included", "off_by_one"), Knob("high", "the end excluded", "off_by_one")),
    "PLACES": (Knob("percent(value, total)", "rounded as `percent` rounds by default", "wrong_default"),
               Knob("percent(value, total, 0)", "rounded to whole percents", "wrong_default")),
    "ORDER": (Knob("textops.truncate(textops.slugify(title), width)",
                   "made a slug, then cut to `width` by `truncate`", "swapped_arguments"),
              Knob("textops.slugify(textops.truncate(title, width))",
                   "cut to `width` by `truncate`, then made a slug", "swapped_arguments")),
    "COUNT": (Knob("len(values)", "how many `values` there are", "missing_edge_case"),
              Knob("len([value for value in values if value])", "how many of `values` are not zero",
                   "missing_edge_case")),
    "MISSING": (Knob("table[key] = default", "gets `default`", "missing_edge_case"),
                Knob("pass", "is left out", "missing_edge_case")),
    "DISTINCT": (Knob("sorted(set(items))", "sorted distinct `items`", "missing_edge_case"),
                 Knob("sorted(items)", "sorted `items`, duplicates kept", "missing_edge_case")),
    "SORTED": (Knob("[mathops.clamp(score, low, high) for score in scores]", "in their order", "missing_edge_case"),
               Knob("sorted((mathops.clamp(score, low, high) for score in scores))", "from lowest to highest",
                    "missing_edge_case")),
    "TALLY": (Knob("len(values)", "how many values there are", "missing_edge_case"),
              Knob("len(set(values))", "how many distinct values there are", "missing_edge_case")),
    "PREFIX": (Knob("i + 1", "`values`[0..`i`]", "off_by_one"), Knob("i", "the values before `i`", "off_by_one")),
    "ABSENT": (Knob("-1", "-1", "wrong_default"), Knob("None", "None", "wrong_default"),
               Knob("len(items)", "the length of `items`", "wrong_default")),
    "SIDE": (Knob("text + fill * (width - len(text))", "followed", "swapped_arguments"),
             Knob("fill * (width - len(text)) + text", "preceded", "swapped_arguments")),
}
"""Behaviour placeholder -> the values a seed chooses from. Knowing a template by heart
does not tell which is right: the seed's docstring and issue say it. A bug may be code
with another value (`trace_gym.coding.repo`), which looks like a correct template."""


def knobs_in(source: str) -> list[str]:
    """The knobs a template's source uses, in `KNOBS` order."""
    return [name for name in KNOBS if f"@{name}@" in source]


def knob_text(choice: dict[str, int], code: dict[str, int] | None = None) -> dict[str, str]:
    """The placeholders' text for a seed's knob values (`choice`); `code` overrides the
    values the code takes (the words stay)."""
    code = {**choice, **(code or {})}
    return {**{name: KNOBS[name][i].code for name, i in code.items()},
            **{f"{name}_DOC": KNOBS[name][i].doc for name, i in choice.items()}}


def _ints(rng: Rng, n: int, low: int, high: int) -> list[int]:
    return [rng.integer(low, high) for _ in range(n)]


_WORDS = ("alpha", "Beta", "gamma", "Delta", "red", "Blue", "green", "tea", "Cup", "sun", "moon", "Star")


def _text(rng: Rng, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def _sized_text(rng: Rng, c: dict[str, Any]) -> list[Any]:
    """A text whose length is near a width: the seed's (the default) or one passed."""
    width = c["WIDTH"] if rng.chance(0.5) else rng.integer(4, 14)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(max(0, width + rng.integer(-3, 3))))
    return [text] if width == c["WIDTH"] else [text, width]


# -- mathops ------------------------------------------------------------------------------

CLAMP = FunctionTemplate(
    name="clamp",
    source='''def clamp(value, low, high):
    """Return `value` limited to the closed range [`low`, `high`]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
''',
    draw=lambda rng, c: (lambda lo: [rng.integer(lo - 30, lo + 60), lo, lo + rng.integer(1, 30)])(
        rng.integer(-40, 40)),
    expectation="it should return `value` limited to the range [`low`, `high`]",
)

PERCENT = FunctionTemplate(
    name="percent",
    source='''def percent(part, whole, digits=@DIGITS@):
    """`part` as a percentage of `whole`, rounded to `digits` places; @ZERO_DOC@ when `whole` is 0."""
    if whole == 0:
        @ZERO@
    return round(100 * part / whole, digits)
''',
    draw=lambda rng, c: [rng.integer(1, 99), 0 if rng.chance(0.3) else rng.integer(3, 97)],
    expectation="it should give `part` as a percentage of `whole`, and @ZERO_DOC@ when `whole` is 0",
)

MEAN = FunctionTemplate(
    name="mean",
    source='''def mean(values):
    """The arithmetic mean of a non-empty list of numbers; ValueError for an empty one."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
''',
    draw=lambda rng, c: [_ints(rng, rng.integer(0, 6), -20, 40)],
    expectation="it should return the arithmetic mean of the values, and raise ValueError for none",
)

RUNNING_TOTAL = FunctionTemplate(
    name="running_total",
    source='''def running_total(values):
    """The list of prefix sums: element `i` is the sum of @PREFIX_DOC@."""
    totals = []
    for i in range(len(values)):
        totals.append(sum(values[: @PREFIX@]))
    return totals
''',
    draw=lambda rng, c: [_ints(rng, rng.integer(2, 6), -9, 30)],
    expectation="element `i` of the result should be the sum of @PREFIX_DOC@",
)

NORMALIZE = FunctionTemplate(
    name="normalize",
    source='''def normalize(values):
    """Each value as a percentage of their total, @PLACES_DOC@; all zeros when the total is 0."""
    total = sum(values)
    if total == 0:
        return [0 for _ in values]
    return [@PLACES@ for value in values]
''',
    draw=lambda rng, c: [_ints(rng, rng.integer(1, 4), 0, 9 if rng.chance(0.2) else 60)],
    expectation="each value should become its percentage of the total, @PLACES_DOC@",
    uses=("percent",),
)

WEIGHTED_MEAN = FunctionTemplate(
    name="weighted_mean",
    source='''def weighted_mean(values, weights):
    """The mean of `values` weighted by `weights`; ValueError when the weights sum to 0."""
    total = sum(weights)
    if total == 0:
        raise ValueError("the weights sum to zero")
    return sum(value * weight for value, weight in zip(values, weights)) / total
''',
    draw=lambda rng, c: (lambda n: [_ints(rng, n, -10, 50), _ints(rng, n, 0, 4)])(rng.integer(1, 4)),
    expectation="it should weight each value by its weight, and raise ValueError when the weights sum to 0",
    held_out=True,
)

# -- textops ------------------------------------------------------------------------------

TRUNCATE = FunctionTemplate(
    name="truncate",
    source='''def truncate(text, width=@WIDTH@, suffix="..."):
    """`text` when it has at most `width` characters, else @CUT_DOC@."""
    if len(text) <= width:
        return text
    return text[: @CUT@] + suffix
''',
    draw=lambda rng, c: _sized_text(rng, c),
    expectation="text longer than `width` should become @CUT_DOC@, and shorter text stay as it is",
)

SLUGIFY = FunctionTemplate(
    name="slugify",
    source='''def slugify(text, sep="@SEP@"):
    """Lower-case words of `text` (@CHARS_DOC@) joined by `sep`."""
    words = re.findall(r"@CHARS@", text)
    return sep.join(word.lower() for word in words)
''',
    draw=lambda rng, c: [_text(rng, rng.integer(2, 4)) + rng.choice(("", "!", " 2024"))],
    expectation="it should join the lower-cased words (@CHARS_DOC@) with `sep`",
)

COUNT_WORDS = FunctionTemplate(
    name="count_words",
    source='''def count_words(text):
    """How often each word occurs in `text`, counted @CASE_DOC@: {word: count}."""
    counts = {}
    for word in @CASE@.split():
        counts[word] = counts.get(word, 0) + 1
    return counts
''',
    draw=lambda rng, c: [_text(rng, rng.integer(3, 6))],
    expectation="it should count each word once per occurrence, @CASE_DOC@",
)

PAD = FunctionTemplate(
    name="pad",
    source='''def pad(text, width=@WIDTH@, fill="."):
    """`text` @SIDE_DOC@ by `fill` characters up to `width`; longer text unchanged."""
    if len(text) >= width:
        return text
    return @SIDE@
''',
    draw=lambda rng, c: _sized_text(rng, c),
    expectation="it should give `text` @SIDE_DOC@ by `fill` characters, exactly `width` in all, and leave longer text alone",
    held_out=True,
)

# -- parsing ------------------------------------------------------------------------------

PARSE_DURATION = FunctionTemplate(
    name="parse_duration",
    source='''UNITS = {"h": 60 * @MINUTE@, "m": @MINUTE@, "s": 1}


def parse_duration(text):
    """Seconds in a duration such as "1h30m" or "45s"; ValueError for anything else."""
    total = 0
    for number, unit in re.findall(r"(\\d+)([hms])", text):
        total += int(number) * UNITS[unit]
    if not re.fullmatch(r"(\\d+[hms])+", text):
        raise ValueError(f"not a duration: {text!r}")
    return total
''',
    draw=lambda rng, c: [_duration(rng) if rng.chance(0.7) else
                         rng.choice((f"{rng.integer(1, 99)}", f"{rng.integer(1, 9)}x", f"h{rng.integer(1, 9)}",
                                     f"{rng.integer(1, 9)}h{rng.integer(1, 9)}"))],
    expectation="it should give the number of seconds in the duration, and raise ValueError for anything else",
)


def _duration(rng: Rng) -> str:
    return "".join(f"{rng.integer(1, 9)}{u}" for u in ("h", "m", "s") if rng.chance(0.6)) or "5s"


PARSE_PAIRS = FunctionTemplate(
    name="parse_pairs",
    source='''def parse_pairs(text):
    """A dict from "key=value;key=value" text; each item is split at @SPLIT_DOC@ "="."""
    pairs = {}
    for item in text.split(";"):
        if not item:
            continue
        key, _, entry = item.@SPLIT@("=")
        pairs[key.strip()] = entry.strip()
    return pairs
''',
    draw=lambda rng, c: [";".join(f"{rng.choice(_WORDS).lower()}={rng.integer(0, 9)}"
                                  + ("=x" if rng.chance(0.4) else "") for _ in range(rng.integer(1, 3)))
                         + (";" if rng.chance(0.4) else "")],
    expectation="it should split each item at @SPLIT_DOC@ '=' into a key and its value",
)

PARSE_RANGE = FunctionTemplate(
    name="parse_range",
    source='''def parse_range(text):
    """The integers of "3-7" (@END_DOC@) or "5"; ValueError when the end is below the start."""
    first, _, last = text.partition("-")
    low = int(first)
    high = int(last) if last else low
    if high < low:
        raise ValueError(f"empty range: {text!r}")
    return list(range(low, @END@))
''',
    draw=lambda rng, c: (lambda a: [rng.choice((f"{a}", f"{a}-{a + rng.integer(-2, 4)}"))])(rng.integer(0, 20)),
    expectation="it should list every integer from the start to the end (@END_DOC@)",
    held_out=True,
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
    """Total in cents of [[price, quantity], ...]; @DISCOUNT@% off when it @REACH_DOC@ `threshold`."""
    lines = [Line(price, quantity) for price, quantity in rows]
    total = sum(line.cost for line in lines)
    if total @REACH@ threshold:
        total -= total * @DISCOUNT@ // 100
    return total
''',
    draw=lambda rng, c: [_reaching(rng, c["THRESHOLD"]) if rng.chance(0.4)
                         else [[rng.integer(1, 60), rng.integer(1, 4)] for _ in range(rng.integer(1, 3))]],
    expectation="it should total price times quantity, less the discount once the total @REACH_DOC@ `threshold`",
)



def _reaching(rng: Rng, threshold: int) -> list[list[int]]:
    """Order rows whose total is exactly `threshold` (where reaching and exceeding differ)."""
    part = rng.integer(0, threshold - 1)
    return [[threshold - part, 1]] + ([[part, 1]] if part else [])


# -- algos --------------------------------------------------------------------------------

BINARY_SEARCH = FunctionTemplate(
    name="binary_search",
    source='''def binary_search(items, target):
    """The index of `target` in the sorted list `items`, or @ABSENT_DOC@ when it is absent."""
    left, right = 0, len(items) - 1
    while left <= right:
        middle = (left + right) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            left = middle + 1
        else:
            right = middle - 1
    return @ABSENT@
''',
    draw=lambda rng, c: (lambda items: [items, rng.choice(items) if rng.chance(0.8) else 1000])(
        sorted({rng.integer(0, 99) for _ in range(rng.integer(1, 7))})),
    expectation="it should return the index of `target`, or @ABSENT_DOC@ only when it is absent",
)

MERGE_INTERVALS = FunctionTemplate(
    name="merge_intervals",
    source='''def merge_intervals(intervals):
    """[start, end] intervals sorted by start, each run of them that @TOUCH_DOC@ merged."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start @TOUCH@ merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
''',
    draw=lambda rng, c: [[(lambda s: [s, s + rng.integer(0, 6)])(rng.integer(0, 20)) for _ in range(rng.integer(2, 4))]],
    expectation="it should merge every pair of intervals that @TOUCH_DOC@",
)

CHUNKS = FunctionTemplate(
    name="chunks",
    source='''def chunks(items, size):
    """`items` split into lists of `size` (@LAST_DOC@)."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[i : i + size] for i in range(0, @LAST@, size)]
''',
    draw=lambda rng, c: [list(range(rng.integer(1, 7))), rng.integer(-1, 3)],
    expectation="it should split `items` into lists of `size` (@LAST_DOC@)",
)

ROTATE = FunctionTemplate(
    name="rotate",
    source='''def rotate(items, steps):
    """`items` rotated @ROTATE_DOC@ by `steps` places (`steps` may exceed the length)."""
    if not items:
        return []
    steps = steps % len(items)
    return @ROTATE@
''',
    draw=lambda rng, c: [list(range(rng.integer(0, 5))), rng.integer(0, 9)],
    expectation="it should rotate `items` @ROTATE_DOC@ by `steps` places, wrapping around",
    held_out=True,
)

# -- report (calls the others: a bug below shows through it) ----------------------------------

SUMMARY = FunctionTemplate(
    name="summary",
    source='''def summary(values):
    """count (@TALLY_DOC@), mean and running totals of a non-empty list of numbers."""
    return {"count": @TALLY@, "mean": mathops.mean(values), "totals": mathops.running_total(values)}
''',
    draw=lambda rng, c: [_ints(rng, rng.integer(1, 5), -9, 30)],
    expectation="it should give the count (@TALLY_DOC@), the mean and the running totals of the values",
    uses=("mean", "running_total"),
)

BOUNDED = FunctionTemplate(
    name="bounded_scores",
    source='''def bounded_scores(scores, low, high):
    """Every score limited to [`low`, `high`], @SORTED_DOC@."""
    return @SORTED@
''',
    draw=lambda rng, c: (lambda lo: [_ints(rng, rng.integer(1, 4), lo - 20, lo + 40), lo, lo + rng.integer(1, 20)])(
        rng.integer(-20, 20)),
    expectation="every score should be limited to the range [`low`, `high`], @SORTED_DOC@",
    uses=("clamp",),
)

SHORT_TITLES = FunctionTemplate(
    name="short_titles",
    source='''def short_titles(titles, width=@WIDTH@):
    """Each title @ORDER_DOC@."""
    return [@ORDER@ for title in titles]
''',
    draw=lambda rng, c: [[_text(rng, rng.integer(1, 4)) + rng.choice(("", "", " 2024", " v2"))
                          for _ in range(rng.integer(1, 3))]],
    expectation="each title should be @ORDER_DOC@",
    uses=("truncate", "slugify"),
)

SHARES = FunctionTemplate(
    name="shares",
    source='''def shares(values):
    """count (@COUNT_DOC@), their total, and each one's percentage of it."""
    return {"count": @COUNT@, "total": sum(values), "percentages": mathops.normalize(values)}
''',
    draw=lambda rng, c: [_ints(rng, rng.integer(1, 4), 0, 60)],
    expectation="it should give the count (@COUNT_DOC@), the total and each value's percentage of it",
    uses=("normalize",),
)

DURATIONS = FunctionTemplate(
    name="durations",
    source='''def durations(text, default=0):
    """Seconds of each "name=duration" setting of `text` (settings separated by ";"); a
    setting without a duration @MISSING_DOC@."""
    table = {}
    for key, entry in parsing.parse_pairs(text).items():
        if not entry:
            @MISSING@
            continue
        table[key] = parsing.parse_duration(entry)
    return table
''',
    draw=lambda rng, c: [";".join(f"{rng.choice(_WORDS).lower()}={_duration(rng) if rng.chance(0.8) else ''}"
                                  for _ in range(rng.integer(1, 3))) + (";" if rng.chance(0.3) else "")],
    expectation="it should map each setting's name to the seconds of its duration; a setting without one @MISSING_DOC@",
    uses=("parse_pairs", "parse_duration"),
)

LOOKUP = FunctionTemplate(
    name="lookup",
    source='''def lookup(items, targets):
    """The index of each target in the @DISTINCT_DOC@, an absent one marked as `binary_search` marks it."""
    ordered = @DISTINCT@
    return [algos.binary_search(ordered, target) for target in targets]
''',
    draw=lambda rng, c: (lambda items: [items, [rng.choice(items) if rng.chance(0.8) else 1000
                                                for _ in range(rng.integer(1, 3))]])(
        [rng.integer(0, 40) for _ in range(rng.integer(1, 7))]),
    expectation="it should give each target's index in the @DISTINCT_DOC@, an absent one marked as `binary_search` marks it",
    uses=("binary_search",),
)

WINDOW_MEANS = FunctionTemplate(
    name="window_means",
    source='''def window_means(values, size):
    """The mean of each run of `size` values, the runs as `chunks` makes them."""
    return [mathops.mean(chunk) for chunk in algos.chunks(values, size)]
''',
    draw=lambda rng, c: [_ints(rng, rng.integer(1, 6), -9, 30), rng.integer(0, 3)],
    expectation="it should give the mean of each consecutive run of `size` values",
    uses=("mean", "chunks"),
    held_out=True,
)

MODULES: tuple[ModuleTemplate, ...] = (
    ModuleTemplate("mathops", "Small arithmetic helpers.", "", (CLAMP, PERCENT, MEAN, RUNNING_TOTAL, NORMALIZE,
                                                                 WEIGHTED_MEAN)),
    ModuleTemplate("textops", "Text helpers: cutting, padding, slugs and word counts.", "import re\n",
                   (TRUNCATE, SLUGIFY, COUNT_WORDS, PAD)),
    ModuleTemplate("parsing", "Parsers for small text formats.", "import re\n",
                   (PARSE_DURATION, PARSE_PAIRS, PARSE_RANGE)),
    ModuleTemplate("orders", "Order lines and totals.", "from typing import NamedTuple\n", (ORDER_TOTAL,)),
    ModuleTemplate("algos", "Small algorithms over lists.", "", (BINARY_SEARCH, MERGE_INTERVALS, CHUNKS, ROTATE)),
    ModuleTemplate("report", "Reports built from the other modules.", "",
                   (SUMMARY, BOUNDED, SHORT_TITLES, SHARES, DURATIONS, LOOKUP, WINDOW_MEANS)),
)
"""Every module template, in the order a package lists them (a module only calls those
before it, or itself)."""

FUNCTIONS: dict[str, tuple[ModuleTemplate, FunctionTemplate]] = {
    f.name: (m, f) for m in MODULES for f in m.functions}
"""Canonical function name -> its module and template."""

NAMES: dict[str, tuple[str, ...]] = {
    # modules
    "mathops": ("mathops", "arith", "numeric", "calc", "mathutil", "numbers_util"),
    "textops": ("textops", "strings", "wording", "textutil", "texttools", "prose"),
    "parsing": ("parsing", "parsers", "readers", "formats", "decode", "grammar"),
    "orders": ("orders", "billing", "carts", "sales", "invoices", "checkout"),
    "algos": ("algos", "listops", "seqtools", "sequences", "collections_util", "arrays"),
    "report": ("report", "reports", "summaries", "digest", "overviews", "insights"),
    # functions
    "clamp": ("clamp", "bound", "clip", "limit_to", "confine", "restrict"),
    "percent": ("percent", "percentage", "pct", "as_percent", "percent_of", "ratio_pct"),
    "mean": ("mean", "average", "avg", "arithmetic_mean", "mean_of", "midpoint_value"),
    "running_total": ("running_total", "prefix_sums", "cumulative", "accumulate_all", "partial_sums",
                      "cumsum"),
    "normalize": ("normalize", "proportions", "share_of_total", "as_shares", "relative", "fractions"),
    "weighted_mean": ("weighted_mean", "weighted_average", "wmean", "mean_weighted", "weighted_avg",
                      "weighted"),
    "truncate": ("truncate", "shorten", "cut", "ellipsize", "abbreviate", "clip_text"),
    "slugify": ("slugify", "to_slug", "make_slug", "slug", "url_name", "kebab"),
    "count_words": ("count_words", "word_counts", "tally_words", "word_frequencies", "histogram", "words_seen"),
    "pad": ("pad", "pad_right", "fill_to", "widen", "ljust_to", "extend_text"),
    "parse_duration": ("parse_duration", "duration_seconds", "read_duration", "to_seconds", "seconds_in",
                       "parse_timespan"),
    "parse_pairs": ("parse_pairs", "parse_settings", "read_pairs", "split_pairs", "parse_options", "kv_parse"),
    "parse_range": ("parse_range", "read_range", "expand_range", "range_of", "span_values", "parse_span"),
    "order_total": ("order_total", "cart_total", "invoice_total", "basket_total", "checkout_total", "amount_due"),
    "binary_search": ("binary_search", "find_index", "bisect_find", "locate", "search_sorted", "index_in"),
    "merge_intervals": ("merge_intervals", "merge_ranges", "coalesce", "join_spans", "union_spans",
                        "combine_intervals"),
    "chunks": ("chunks", "batched", "split_every", "groups_of", "partition_by", "slices"),
    "rotate": ("rotate", "rotate_left", "shift_items", "cycle_by", "roll", "wrap_around"),
    "summary": ("summary", "describe", "overview", "stats_of", "profile", "summarize"),
    "bounded_scores": ("bounded_scores", "clip_scores", "limit_scores", "capped_scores", "clamp_all",
                       "confined_scores"),
    "short_titles": ("short_titles", "title_slugs", "compact_titles", "slug_titles", "brief_titles",
                     "title_keys"),
    "shares": ("shares", "breakdown", "share_report", "distribution", "composition", "split_report"),
    "durations": ("durations", "timings", "duration_table", "timeouts_of", "time_settings", "seconds_table"),
    "lookup": ("lookup", "positions", "find_all", "index_of_each", "where_are", "ranks_of"),
    "window_means": ("window_means", "block_means", "chunk_averages", "batch_means", "moving_blocks",
                     "segment_means"),
    # module-level names of a template
    "UNITS": ("UNITS", "SECONDS_PER", "FACTORS", "MULTIPLIERS", "UNIT_SECONDS"),
    "Line": ("Line", "Item", "Row", "Entry", "Position", "OrderLine"),
    "cost": ("cost", "subtotal", "line_cost", "extended", "line_total"),
    "price": ("price", "unit_price", "cents", "each", "rate"),
    "quantity": ("quantity", "qty", "count_of", "units", "how_many"),
    # parameters and locals
    "value": ("value", "x", "amount", "number_in", "v", "val_in"),
    "values": ("values", "numbers", "data", "samples", "xs", "readings"),
    "low": ("low", "lower_bound", "min_value", "lo", "floor_at"),
    "high": ("high", "upper_bound", "max_value", "hi", "ceiling_at"),
    "part": ("part", "portion", "piece", "numerator", "share"),
    "whole": ("whole", "base", "denominator", "overall", "full"),
    "digits": ("digits", "places", "ndigits", "precision", "decimals"),
    "totals": ("totals", "sums", "prefix", "running_sums", "out_list"),
    "acc": ("acc", "running", "so_far", "accum", "subtotal_now"),
    "i": ("i", "k", "idx", "pos", "j"),
    "total": ("total", "result", "grand", "tally_sum", "sum_all"),
    "weights": ("weights", "wts", "factors", "importance", "coefs"),
    "weight": ("weight", "wt", "factor", "coef", "importance_of"),
    "text": ("text", "s", "string", "raw", "source", "txt"),
    "width": ("width", "limit", "max_len", "size_limit", "max_chars", "cap"),
    "suffix": ("suffix", "ellipsis", "tail", "marker", "ending"),
    "sep": ("sep", "joiner", "delimiter", "glue", "separator"),
    "fill": ("fill", "pad_char", "filler", "padding", "fill_char"),
    "words": ("words", "tokens", "parts", "terms", "found_words"),
    "word": ("word", "token", "w", "term", "each_word"),
    "counts": ("counts", "freq", "tally", "seen", "occurrences"),
    "number": ("number", "amount_text", "num", "digits_text", "qty_text"),
    "unit": ("unit", "unit_char", "letter", "suffix_letter", "kind"),
    "pairs": ("pairs", "mapping", "settings", "options", "parsed_pairs"),
    "item": ("item", "entry_text", "field", "chunk_text", "piece_text"),
    "key": ("key", "name", "label", "setting_name", "option"),
    "entry": ("entry", "setting", "val", "raw_value", "option_value"),
    "first": ("first", "head", "lead", "left_text", "from_text"),
    "last": ("last", "rest", "trail", "right_text", "to_text"),
    "rows": ("rows", "entries", "order_rows", "records", "pairs_in"),
    "lines": ("lines", "parsed", "line_items", "line_list", "order_lines"),
    "line": ("line", "ln", "one", "position_row", "order_line"),
    "threshold": ("threshold", "minimum_total", "cutoff", "discount_from", "min_spend"),
    "items": ("items", "seq", "elements", "arr", "lst", "things"),
    "target": ("target", "needle", "wanted", "key_value", "sought"),
    "left": ("left", "first_index", "start_at", "low_index", "a"),
    "right": ("right", "last_index", "stop_at", "high_index", "b"),
    "middle": ("middle", "mid", "pivot", "centre", "m"),
    "intervals": ("intervals", "spans", "ranges_in", "periods", "windows_in"),
    "merged": ("merged", "out", "joined", "combined", "result_spans"),
    "start": ("start", "begin", "opening", "since", "from_"),
    "end": ("end", "finish", "stop", "until", "to_"),
    "size": ("size", "n", "step_size", "batch", "per_group"),
    "steps": ("steps", "shift", "offset", "places_left", "by"),
    "scores": ("scores", "marks", "points", "grades", "ratings"),
    "score": ("score", "mark", "point", "grade", "rating"),
    "titles": ("titles", "headings", "names_in", "headlines", "captions"),
    "title": ("title", "heading", "caption", "headline", "label_text"),
    "targets": ("targets", "needles", "queries", "wanted_values", "keys_in"),
    "ordered": ("ordered", "sorted_copy", "ranked", "uniq", "sorted_unique"),
    "chunk": ("chunk", "block", "window", "group", "run"),
}
"""Canonical identifier -> the names a seed chooses from (the canonical one first). No
name is in two pools, so a seed's choices never collide; identifiers without a pool (the
standard library's, `self`, `_`) keep their names."""

ATTRIBUTES = frozenset({name for name in FUNCTIONS} | {"cost", "price", "quantity"})
"""The canonical names that are also renamed after a dot (`module.function`, `line.cost`);
other attributes (`.items()`, `.append`) belong to the standard library."""

_MENTION = re.compile(r"`(" + "|".join(sorted(NAMES, key=len, reverse=True)) + r")`")


def rename_prose(text: str, chosen: dict[str, str]) -> str:
    """`text` (a docstring or an expectation) with each identifier it mentions in backticks
    renamed as the seed chose; other words stay (an identifier may be an English word too)."""
    return _MENTION.sub(lambda m: f"`{chosen.get(m.group(1), m.group(1))}`", text)


def canonical(name: str) -> str | None:
    """The canonical identifier whose pool holds `name` (None when no pool does)."""
    return _CANONICAL.get(name)


_CANONICAL = {name: key for key, pool in NAMES.items() for name in pool}


def fill(text: str, constants: dict[str, Any]) -> str:
    """`text` with each `@NAME@` replaced by the seed's constant."""
    for name, value in constants.items():
        text = text.replace(f"@{name}@", str(value))
    return text


def pools_are_disjoint() -> bool:
    """Whether no name is in two pools and none is a keyword or a builtin (the generator's
    premise: a seed's choices never collide with each other or with what the code uses)."""
    seen = [name for pool in NAMES.values() for name in pool]
    return (len(seen) == len(set(seen)) and all(n.isidentifier() for n in seen)
            and not any(keyword.iskeyword(n) or hasattr(builtins, n) for n in seen))
