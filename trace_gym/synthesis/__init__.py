"""Step 2: the synthesis agent writes one capability environment per selected capability.

For each PENDING capability of a selected_capabilities.json (highest mean Delta first): ask
an LLM, through `prompts/environment_generation.md`, for one module; extract the code;
stage it; audit it (static rules, then the sandboxed kit); with a calibration policy, roll
it out and check the difficulty bands; on failure, send the findings back and ask again,
at most `attempts` times. A module that passes is installed in the envs directory (module,
manifest entry, audit lock entry) as `trace/<capability>-v0` with status READY; after the
last failed attempt the capability is marked FAILED with the last report. Every attempt's
prompt, response, module and report is kept under the run directory. Installed envs are
never overwritten without `replace`.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.audit.lock import record as record_lock
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import sha256_bytes, write_json_atomic
from trace_gym.render import printable

logger = logging.getLogger(__name__)

_CODE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
STATUSES = ("PENDING", "READY", "FAILED", "SHIPPED", "NOT_SELECTED")


def extract_code(response: str) -> str | None:
    """The module in a reply: the longest fenced Python block (or the whole reply when it
    parses as Python on its own)."""
    response = re.sub(r"<think>.*?</think>", "", response or "", flags=re.DOTALL)
    blocks = _CODE.findall(response)
    if blocks:
        return max(blocks, key=len).strip() + "\n"
    try:
        ast.parse(response)
        return response.strip() + "\n" if response.strip() else None
    except SyntaxError:
        return None


def env_class_name(code: str) -> str | None:
    """The env class a module defines, read from its syntax (the module is not imported)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
            if bases & {"CapabilityEnv", "TraceEnv"}:
                return node.name
    return None


def default_envs_dir() -> Path:
    """generated_envs/ when it is writable (a checkout), else the per-user envs directory."""
    import os

    from trace_gym.registry import shipped_envs_dir, user_envs_dir

    package = shipped_envs_dir()
    return package if os.access(package, os.W_OK) else user_envs_dir()


def load_selection(path: Path) -> dict[str, Any]:
    """Read a selected_capabilities.json, refusing one whose capabilities lack a name or a known status."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceGymError(f"{path}: cannot read a selected_capabilities.json ({exc})") from None
    caps = data.get("capabilities") if isinstance(data, dict) else None
    if not isinstance(caps, list) or any(not isinstance(c, dict) or "name" not in c or c.get("status") not in STATUSES
                                         for c in caps):
        raise TraceGymError(f"{path}: expected 'capabilities', each with a name and a status in {STATUSES}")
    return data


@dataclass
class Calibration:
    """Roll the staged env out with a base policy and check the bands. The module runs in
    the sandboxed env worker, as it will in training, never in this process."""

    policy_factory: Callable[[], Any]
    seeds: int = 100
    samples: int = 16
    bands: Any = None

    def run(self, path: Path) -> dict[str, Any]:
        """The calibration of the staged module at `path`: its figures, the bands, and the
        problems (an episode whose env failed is one)."""
        from trace_gym.calibration import Bands, calibrate
        from trace_gym.driver import EpisodeRequest, borrowed, play
        from trace_gym.sandbox.proxy import EnvSource, RemoteEnv

        env = RemoteEnv(EnvSource.from_file(path))
        try:
            episodes = [EpisodeRequest(seed, sample) for seed in range(self.seeds) for sample in range(self.samples)]
            # one worker instance for every episode: the driver must not close it between them
            played = play(episodes, self.policy_factory, env_id="staged", make_env=lambda _: borrowed(env))
            records = [episode.record() for episode in played]
        finally:
            env.close()
        result = calibrate(records, self.bands or Bands())
        failed = [r for r in records if r.get("error")]
        if failed:  # an env that fails is not calibrated, whatever its figures
            result["problems"] = [*result["problems"], (f"the env failed in {len(failed)} of {len(records)} "
                                                        f"episode(s) (first: {failed[0]['error']})")]
            result["calibrated"] = False
        return result


@dataclass
class SynthesisResult:
    """What synthesis did for one capability: its final status, the attempts it took, the env it
    made (id and path) and the last validation report."""

    capability: str
    status: str
    attempts: int
    env_id: str | None = None
    path: str | None = None
    last_report: dict[str, Any] | None = None


def _manifest_entry(envs_dir: Path, name: str, cls: str, description: str, sha: str) -> dict[str, Any]:
    from trace_gym.registry import SHIPPED_PACKAGE, shipped_envs_dir

    module_path = envs_dir / f"{name}.py"
    if envs_dir.resolve() == shipped_envs_dir().resolve():
        entry_point = f"{SHIPPED_PACKAGE}.{name}:{cls}"
    else:
        entry_point = f"file:{module_path.resolve()}:{cls}"
    return {"id": f"trace/{name}-v0", "entry_point": entry_point, "capability": name,
            "description": description[:200], "origin": "synthesized", "sha256": sha}


def install(envs_dir: Path, name: str, code: str, description: str, report: dict[str, Any],
            replace: bool = False) -> Path:
    """Put an audited module in the envs directory with its manifest and lock entries;
    `report` is its passing audit's (`AuditReport.to_json()`): its results, seed base and
    isolation go in the lock."""
    from trace_gym.audit.lock import current_key
    from trace_gym.testing import KitSettings

    envs_dir.mkdir(parents=True, exist_ok=True)
    target = envs_dir / f"{name}.py"
    manifest_path = envs_dir / "manifest.json"
    manifest: dict[str, Any] = (json.loads(manifest_path.read_text()) if manifest_path.is_file()
                                else {"schema_version": 1, "envs": []})
    env_id = f"trace/{name}-v0"
    existing = [e for e in manifest["envs"] if e["id"] == env_id]
    if (existing or target.exists()) and not replace:
        raise TraceGymError(f"{env_id} is already installed in {envs_dir}; pass replace to overwrite it")
    cls = env_class_name(code)
    if cls is None:
        raise TraceGymError(f"the module for {name} defines no env class")
    sha = sha256_bytes(code.encode())
    tmp = target.with_suffix(".py.partial")
    tmp.write_text(code, encoding="utf-8")
    tmp.replace(target)
    record_lock(envs_dir, sha, {"env_id": env_id, **current_key(),
                                "hypothesis_seed": KitSettings(seed_base=report["seed_base"]).hypothesis_seed,
                                "seed_base": report["seed_base"],
                                "isolation": "bubblewrap" if report["sandboxed"] else "fallback", "static": [],
                                "results": [{k: r[k] for k in ("name", "passed", "detail")} for r in report["results"]]})
    manifest["envs"] = [e for e in manifest["envs"] if e["id"] != env_id]
    manifest["envs"].append(_manifest_entry(envs_dir, name, cls, description, sha))
    write_json_atomic(manifest_path, manifest)
    return target


def synthesize(selected: Path, complete: Callable[[list[dict[str, str]]], str], *, records: list[dict[str, Any]] | None = None,
               envs_dir: Path | None = None, run_dir: Path, attempts: int = 5, replace: bool = False,
               calibration: Calibration | None = None, kit_settings: Any = None, limits: Any = None,
               seed_base: int | None = None) -> list[SynthesisResult]:
    """Synthesize every PENDING capability of `selected`; `complete(messages) -> text` is
    the synthesis agent. Updates the statuses in `selected` as it goes. Each audit draws its
    kit's seed base at random unless `seed_base` is given."""
    from trace_gym.audit import Limits, audit
    from trace_gym.synthesis.prompt import render
    from trace_gym.synthesis.tools import target_tools
    from trace_gym.testing import KitSettings
    from trace_gym.trajectory import summarize

    selected = Path(selected)
    data = load_selection(selected)
    envs_dir = Path(envs_dir) if envs_dir else default_envs_dir()
    run_dir = Path(run_dir)
    records = records or []
    tools = target_tools(records)
    pending = sorted((c for c in data["capabilities"] if c["status"] == "PENDING"), key=lambda c: -c.get("mean_delta", 0))
    results = []
    for capability in pending:
        name = capability["name"]
        env_id = f"trace/{name}-v0"
        if (envs_dir / f"{name}.py").exists() and not replace:
            logger.info(f"{env_id}: already installed in {envs_dir}; kept (pass --replace to regenerate)")
            capability["status"] = "READY"
            results.append(SynthesisResult(name, "READY", 0, env_id, str(envs_dir / f"{name}.py")))
            write_json_atomic(selected, data)
            continue
        failed_ids = set(capability.get("example_failed_ids") or [])
        examples = [summarize(r) for r in records if r["id"] in failed_ids][:4]
        prompt = render({"name": name, "description": capability.get("description", "")}, examples, tools)
        messages = [{"role": "user", "content": prompt}]
        report: dict[str, Any] | None = None
        status = "FAILED"
        path = None
        for attempt in range(1, attempts + 1):
            folder = run_dir / name / f"attempt_{attempt}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "prompt.json").write_text(json.dumps(messages, indent=1))
            response = complete(messages)
            (folder / "response.md").write_text(response)
            code = extract_code(response)
            if code is None:
                report = {"passed": False, "reasons": ["the reply holds no Python module in a ```python block"]}
            else:
                staged = run_dir / name / "staging" / f"{name}.py"
                staged.parent.mkdir(parents=True, exist_ok=True)
                staged.write_text(code, encoding="utf-8")
                (folder / "module.py").write_text(code, encoding="utf-8")
                if env_class_name(code) is None:
                    report = {"passed": False, "reasons": ["the module defines no class subclassing CapabilityEnv"]}
                else:
                    audited = audit(str(staged), kit_settings or KitSettings(), limits or Limits(), record=False,
                                    seed_base=seed_base)
                    report = audited.to_json()
                    if audited.passed and calibration is not None:
                        report["calibration"] = calibration.run(staged)
                        if not report["calibration"]["calibrated"]:
                            report["passed"] = False
                            report["reasons"] = [f"calibration: {p}" for p in report["calibration"]["problems"]]
            (folder / "report.json").write_text(json.dumps(report, indent=1, default=str))
            outcome = "passed" if report["passed"] else "failed: " + "; ".join(report["reasons"][:3])
            # a module's words, never a terminal's orders
            logger.info(printable(f"{env_id}: attempt {attempt}: {outcome}"))
            if report["passed"] and code is not None:  # a report passes only where the reply held a module
                path = install(envs_dir, name, code, capability.get("description", ""), report, replace)
                status = "READY"
                break
            messages = [*messages, {"role": "assistant", "content": response},
                        {"role": "user", "content": "The module was rejected:\n- " + "\n- ".join(report["reasons"])
                         + "\nFix every point and reply with the complete module in one ```python block."}]
        capability["status"] = status
        if status == "FAILED":
            capability["last_report"] = report
        write_json_atomic(selected, data)
        results.append(SynthesisResult(name, status, attempt, env_id if status == "READY" else None,
                                       str(path) if path else None, report))
    return results


__all__ = ["synthesize", "install", "extract_code", "env_class_name", "Calibration", "SynthesisResult",
           "default_envs_dir", "load_selection"]
