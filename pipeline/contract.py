"""The stage contract: what a pipeline stage is, one typed unit in its own module
(`trace_gym.pipeline.stages`).

A stage declares its TOML table (a `Table` dataclass: its keys, their defaults and their
docstrings, which the command line turns into flags), what decides its outputs (`inputs`,
the cache key), how to produce them (`run`, returning its `Record` dataclass), how long that
takes on this machine (`estimate`) and what the report says of it (`report`). The run loop,
the configuration's tables, the dry run's plan, the clock and the report are all read off
`STAGES`, so a new stage is its module and a line in that list.

    @dataclass(frozen=True)
    class Table(StageTable):
        TABLE = "summary"
        top: int = 3
        \"\"\"How many capabilities the summary names.\"\"\"

    @dataclass
    class Summary(Record):
        names: list[str]

    class SummaryStage(Stage[Table, Summary]):
        name, table, record = "summary", Table, Summary
        def inputs(self, state): return {"analysis": state.get(analysis.STAGE).to_json()}
        def run(self, directory, state): ...

Records are stored as JSON (`stages/NAME.json`) and read back into their dataclass, so a
rerun and a resumed run see the same typed values; a record's `to_json` is the dict the
stage's later readers hash, which keeps the cache keys of runs made before stages were
typed.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, cast

from typing_extensions import Self

from trace_gym.agents.spec import PolicySpec
from trace_gym.errors import InvalidConfig
from trace_gym.jsondata import sha256_json, write_json_atomic

T = TypeVar("T", bound="StageTable")
R = TypeVar("R", bound="Record")


class StageTable:
    """A stage's TOML table as a frozen dataclass: every key a field with its default and a
    docstring under it (the `--TABLE-KEY` flag's help text)."""

    TABLE: ClassVar[str]
    """The table's name in the run configuration (`[rollout]`)."""

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The table's keys and their defaults, as TOML gives them (tuples as lists)."""
        out = {}
        for f in _fields(cls):
            value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_table(cls, table: dict[str, Any], where: str) -> Self:
        """The table's values over the defaults; an unknown key is refused, naming `where`,
        the key and the allowed ones."""
        if not isinstance(table, dict):
            raise InvalidConfig(f"{where}: [{cls.TABLE}] must be a table")
        known = [f.name for f in _fields(cls)]
        bad = sorted(set(table) - set(known))
        if bad:
            raise InvalidConfig(f"{where}: [{cls.TABLE}] has unknown key(s) {bad}; allowed: {', '.join(known)}")
        try:
            return cls(**table)
        except (TypeError, InvalidConfig) as exc:  # the dataclass's own check names the key and the rule
            raise InvalidConfig(f"{where}: {exc}") from None

    def values(self) -> dict[str, Any]:
        """The table as a dict (what a stage's cache key holds)."""
        return json.loads(json.dumps(dataclasses.asdict(cast(Any, self))))


@dataclass(frozen=True)
class PlayingTable(StageTable):
    """A table whose stage plays episodes: how long a turn may be and how many play at once."""

    max_new_tokens: int = 192
    """Tokens per agent turn at most."""
    batch: int = 16
    """Episodes in flight at once (a local model generates them together)."""


class Record:
    """A stage's outputs as a dataclass, stored as JSON in the run's `stages/NAME.json`.

    A field that is a `Record` (or a list or str-keyed dict of them) is read back as one; a
    field left at None is not written, as the untyped records before it did not write it."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the JSON while None (absent from the records of earlier runs)."""

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON dict its readers hash."""
        out: dict[str, Any] = {}
        for f in _fields(type(self)):
            value = getattr(self, f.name)
            if value is None and f.name in self.OMIT_NONE:
                continue
            out[f.name] = _to_json(value)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The record from its JSON dict."""
        hints = typing.get_type_hints(cls)
        values = {f.name: _from_json(hints[f.name], data[f.name]) for f in _fields(cls) if f.name in data}
        return cls(**values)


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of a table or record class (each subclass is a dataclass)."""
    return dataclasses.fields(cast(Any, cls))


def _to_json(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _from_json(hint: Any, value: Any) -> Any:
    """`value` read as `hint` says: records built, containers of records walked."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return None if value is None else _from_json(inner[0], value) if len(inner) == 1 else value
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_json(value)
    if origin is dict and len(args) == 2:
        return {k: _from_json(args[1], v) for k, v in value.items()}
    if origin is list and args:
        return [_from_json(args[0], v) for v in value]
    return value


@dataclass(frozen=True)
class RunConfig:
    """A loaded run configuration (`trace_gym.pipeline.config.load`): the run's own settings
    (`[pipeline]`), every stage's table, the trainer's `[train]` table and the envs' knobs."""

    source: str
    """The file it was read from."""
    budget: str
    domain: str
    targets: tuple[str, ...]
    seed: int
    tables: dict[str, StageTable]
    """Table name -> its stage's `StageTable` (defaults filled in)."""
    train: dict[str, Any]
    """The `[train]` table: `GRPOConfig` fields (checked there)."""
    env_knobs: dict[str, dict[str, Any]]
    """Env id -> the `gym.make` knobs the file sets for it (as given)."""

    def table(self, cls: type[T]) -> T:
        """The stage table of type `cls`."""
        value = self.tables[cls.TABLE]
        if not isinstance(value, cls):
            raise TypeError(f"[{cls.TABLE}] holds a {type(value).__name__}, not a {cls.__name__}")
        return value

    def knobs(self, env_id: str) -> dict[str, Any]:
        """The env's gym.make knobs: compact prompts (the embedded agent's) unless the file
        says otherwise."""
        from trace_gym.runconfig import embedded_knobs

        return embedded_knobs(self.env_knobs.get(env_id))


@dataclass
class Run:
    """A run directory and its stage records (`stages/NAME.json`): a stage whose inputs hash
    as they did at its last finished run is reused; a stage killed under the same inputs
    resumes from what its directory holds; changed inputs start it afresh."""

    out: Path
    log: Callable[[str], None]
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        (self.out / "stages").mkdir(parents=True, exist_ok=True)

    def record(self, name: str) -> dict[str, Any] | None:
        """The record of stage `name`'s last finished run, or None."""
        path = self.out / "stages" / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def stage(self, name: str, inputs: dict[str, Any], fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """Stage `name`'s outputs: its last record's when `inputs` hash the same, else
        `fn(directory)` run (afresh when the inputs changed since its directory was made)
        and recorded."""
        key = sha256_json(inputs)
        done = self.record(name)
        if done is not None and done["inputs_sha256"] == key:
            self.seconds[name] = done["seconds"]
            self.skipped.append(name)
            self.log(f"{name}: unchanged, reused")
            return done["outputs"]
        directory = self.out / name
        # A stage killed under these inputs resumes from what its directory holds; one whose
        # inputs changed starts afresh (its resumable parts would refuse the new settings).
        marker = directory / ".inputs_sha256"
        if directory.exists() and (not marker.is_file() or marker.read_text().strip() != key):
            self.log(f"{name}: inputs changed, rerun" if done is not None or marker.is_file() else
                     f"{name}: running afresh")
            shutil.rmtree(directory)
        directory.mkdir(parents=True, exist_ok=True)
        marker.write_text(key + "\n")
        self.log(f"{name}: running")
        start = time.perf_counter()
        outputs = fn(directory)
        seconds = time.perf_counter() - start
        self.seconds[name] = seconds
        write_json_atomic(self.out / "stages" / f"{name}.json",
                          {"inputs_sha256": key, "outputs": outputs, "seconds": round(seconds, 1)})
        self.log(f"{name}: done in {seconds:.0f} s")
        return outputs


@dataclass
class Contender:
    """A row of the final table: the policy, greedy, and the knobs it adds on each target
    (GEPA's instructions)."""

    spec: PolicySpec
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class State:
    """A run in progress: its configuration, its directory and every finished stage's record."""

    config: RunConfig
    run: Run
    stages: list[Stage[Any, Any]] = field(default_factory=list)
    """The run's stages in order (`STAGES`)."""
    records: dict[str, Record | None] = field(default_factory=dict)
    """Stage name -> its record (None: the stage had nothing to do; `notes` says why)."""
    notes: dict[str, str] = field(default_factory=dict)
    """Stage name -> why it produced nothing."""
    report: dict[str, str] = field(default_factory=dict)
    """Where the report was written: "markdown" and "html"."""

    @property
    def out(self) -> Path:
        """The run directory."""
        return self.run.out

    def get(self, stage: Stage[Any, R]) -> R:
        """`stage`'s record; an error naming the stage when it has none."""
        value = self.records.get(stage.name)
        if value is None:
            raise KeyError(f"stage {stage.name!r} has no record in this run"
                           + (f": {self.notes[stage.name]}" if stage.name in self.notes else ""))
        return cast(R, value)  # what stage.run returned, or read back into stage.record

    def find(self, stage: Stage[Any, R]) -> R | None:
        """`stage`'s record, or None where it produced none."""
        return cast("R | None", self.records.get(stage.name))


@dataclass
class Step:
    """One line of the dry run's plan."""

    stage: str
    work: str
    """What the stage does, in words."""
    seconds: float | None
    """The estimate, None where this machine has measured no rate for the work."""
    basis: str
    """What the estimate rests on."""


@dataclass
class Block:
    """One piece of the report: a heading, a paragraph, a table (`rows`, the first the
    header) or an image (`path`, `text` its caption)."""

    kind: str
    """'h1', 'h2', 'p', 'table' or 'image'."""
    text: str = ""
    rows: list[list[str]] | None = None
    path: Path | None = None


class Stage(Generic[T, R]):
    """One stage of the pipeline. Subclasses set `name`, `table` (their `StageTable`, or
    None) and `record` (their `Record`), and define `inputs` and `run`; `estimate` and
    `report` default to nothing. A stage that runs several times (one adapter per env)
    overrides `execute`."""

    name: str
    """The stage's name: its record (`stages/NAME.json`), directory and progress label."""
    table: type[T] | None = None
    record: type[R]

    def config(self, config: RunConfig) -> T:
        """This stage's table of `config`."""
        if self.table is None:
            raise TypeError(f"stage {self.name!r} has no table")
        return config.table(self.table)

    def skip(self, state: State) -> str | None:
        """Why the stage has nothing to do in this run (None: it runs)."""
        return None

    def inputs(self, state: State) -> dict[str, Any]:
        """What decides the stage's outputs: the cache key (hashed)."""
        raise NotImplementedError

    def run(self, directory: Path, state: State) -> R:
        """Produce the stage's record, writing its files under `directory`."""
        raise NotImplementedError

    def execute(self, run: Run, state: State) -> R:
        """The stage's record: reused from the run directory when its inputs are unchanged,
        else run."""
        return self.record.from_json(run.stage(self.name, self.inputs(state),
                                               lambda d: self.run(d, state).to_json()))

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """The dry run's lines for this stage under `config` (`before`: the stages that run
        before it)."""
        return []

    def report(self, state: State) -> list[Block]:
        """The report's blocks for this stage."""
        return []

    def contenders(self, state: State, max_new_tokens: int) -> dict[str, Contender]:
        """The rows this stage adds to the final table (label -> contender), each generating
        at most `max_new_tokens` a turn."""
        return {}

    def rows(self, config: RunConfig) -> int:
        """How many rows this stage adds to the final table at most (the dry run's count)."""
        return 0

    def contender_inputs(self, state: State) -> dict[str, Any]:
        """What of this stage decides its rows (part of the evaluation's cache key)."""
        return {}


def table_types(stages: list[Stage[Any, Any]]) -> Iterator[type[StageTable]]:
    """The stages' tables, each once, in the stages' order."""
    seen: set[str] = set()
    for stage in stages:
        if stage.table is not None and stage.table.TABLE not in seen:
            seen.add(stage.table.TABLE)
            yield stage.table
