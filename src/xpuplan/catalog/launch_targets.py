"""Pinned launch targets and the check that an emitted command is accepted by the pinned release.

``catalog/data/launch_targets.yaml`` pins one release of every framework ``--emit`` writes for
(Megatron-LM, Megatron-Bridge, torchtitan, DeepSpeed, torchrun, vLLM, vllm-ascend, SGLang and its
router, TensorRT-LLM, MindIE, LMDeploy): version, release date, source, and the flags that release's
own parser accepts with their type or choices. :func:`check_segment` parses an emitted argv the way
an argparse-style parser does (``--flag value``, ``--flag=value``, switches, ``nargs`` lists) and
reports every flag the pinned release does not know and every value of the wrong type or outside the
recorded choices; :func:`check_keys` does the same for config-file keys.

:class:`Segment`, :class:`Command` and :class:`LaunchPlan` are the emitted result: one or more
commands (a disaggregated deployment has a prefill pool, a decode pool and a router), the files they
read (DeepSpeed JSON, TensorRT-LLM YAML, MindIE ``config.json``) and notes on what a target cannot
express. ``to_text`` prints one flag per line with backslashes; ``to_dict`` is the JSON form.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xpuplan.datafile import load_file
from xpuplan.errors import UserInputError

DATA_FILE = Path(__file__).parent / "data" / "launch_targets.yaml"

FlagSpec = str | list[str] | dict[str, Any]
_KINDS = ("int", "float", "str", "flag")


class ProgramIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flags: dict[str, FlagSpec]


class LaunchTarget(BaseModel):
    """One pinned release: what it is, where its flags were recorded, and the flags."""

    model_config = ConfigDict(extra="allow")
    name: str
    version: str
    released: str
    source: str
    recorded: str
    programs: dict[str, ProgramIn] = Field(default_factory=dict)

    def extra(self, key: str) -> Any:
        return (self.model_extra or {}).get(key)


class LaunchTargetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int
    targets: dict[str, LaunchTarget]


@lru_cache(maxsize=1)
def launch_targets() -> dict[str, LaunchTarget]:
    """The pinned targets of ``launch_targets.yaml`` by key (loaded once)."""
    return load_file(LaunchTargetsFile, DATA_FILE).targets


def target(key: str) -> LaunchTarget:
    try:
        return launch_targets()[key]
    except KeyError:
        raise UserInputError(f"no pinned launch target {key!r} in {DATA_FILE.name}", field="emit") from None


# =================================================================================================
# Checking
# =================================================================================================
def _spec_parts(spec: FlagSpec) -> tuple[str, list[str] | None, str | None]:
    """(kind, choices, nargs) of a recorded flag spec."""
    if isinstance(spec, str):
        return spec, None, None
    if isinstance(spec, list):
        return "str", [str(c) for c in spec], None
    choices = spec.get("choices")
    return str(spec.get("type", "str")), ([str(c) for c in choices] if choices is not None else None), spec.get("nargs")


def _value_problem(flag: str, value: str, kind: str, choices: list[str] | None) -> str | None:
    if choices is not None:
        return None if value in choices else f"{flag} {value!r} is not one of the recorded choices ({', '.join(choices[:12])}" \
            + (", ..." if len(choices) > 12 else "") + ")"
    if kind == "int":
        try:
            int(value)
        except ValueError:
            return f"{flag} expects an integer, got {value!r}"
    elif kind == "float":
        try:
            float(value)
        except ValueError:
            return f"{flag} expects a number, got {value!r}"
    return None


_ENV_REF = re.compile(r"^(https?://)?\$[A-Z_][A-Z0-9_]*(:[0-9]+)?$")


def quote(tok: str) -> str:
    """Shell quoting that leaves ``$VAR`` and ``$VAR:PORT`` for the shell to expand."""
    return f'"{tok}"' if _ENV_REF.match(tok) else shlex.quote(tok)


def shell_join(argv: Iterable[str]) -> str:
    return " ".join(quote(a) for a in argv)


def _is_flag(tok: str) -> bool:
    if not tok.startswith("-") or tok == "-":
        return False
    try:
        float(tok)
        return False
    except ValueError:
        return True


def check_argv(flags: Mapping[str, FlagSpec], args: Sequence[str], *, positionals: int = 0,
               overrides: bool = False) -> tuple[list[str], list[str]]:
    """Problems of ``args`` (program head removed) against recorded ``flags``, and the KEY=VALUE overrides.

    A flag must be recorded; a switch takes no value; a valued flag takes one value (or its
    ``nargs``), each of the recorded type and among the recorded choices. Up to ``positionals``
    bare tokens are allowed; with ``overrides`` bare ``KEY=VALUE`` tokens are returned for the
    caller to check.
    """
    problems: list[str] = []
    kv: list[str] = []
    bare = 0
    i = 0
    while i < len(args):
        tok = args[i]
        if not _is_flag(tok):
            if overrides and "=" in tok:
                kv.append(tok)
            else:
                bare += 1
                if bare > positionals:
                    problems.append(f"unexpected argument {tok!r}")
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        if name not in flags:
            problems.append(f"unknown flag {name} (not in the pinned release)")
            i += 1
            continue
        kind, choices, nargs = _spec_parts(flags[name])
        if kind not in _KINDS:
            problems.append(f"{name}: unknown recorded kind {kind!r}")
        if kind == "flag":
            if eq:
                problems.append(f"{name} is a switch and takes no value")
            i += 1
            continue
        values: list[str] = []
        if eq:
            values = [inline]
            i += 1
        else:
            i += 1
            want = 1 if nargs is None else (int(nargs) if str(nargs).isdigit() else None)
            while i < len(args) and not _is_flag(args[i]) and (want is None or len(values) < want):
                if overrides and "=" in args[i] and want is None:
                    break
                values.append(args[i])
                i += 1
            if want is not None and len(values) != want:
                problems.append(f"{name} takes {want} value(s), got {len(values)}")
                continue
            if nargs == "+" and not values:
                problems.append(f"{name} takes at least one value")
                continue
        for v in values:
            p = _value_problem(name, v, kind, choices)
            if p:
                problems.append(p)
    return problems, kv


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> list[str]:
    """Keys of ``data`` that are not in ``allowed`` (a config block of a pinned release)."""
    ok = set(allowed)
    return [f"{where}: unknown key {k!r} (not in the pinned release)" for k in data if k not in ok]


# =================================================================================================
# Emitted commands
# =================================================================================================
@dataclass(frozen=True)
class Segment:
    """Part of a command line read by one parser: ``head`` (the program words), then flags."""

    target: str
    program: str
    head: tuple[str, ...]
    args: tuple[str, ...]
    positionals: int = 0
    overrides: bool = False

    @property
    def argv(self) -> tuple[str, ...]:
        return self.head + self.args

    def problems(self) -> list[str]:
        t = target(self.target)
        prog = t.programs.get(self.program)
        if prog is None:
            return [f"{self.target}: no recorded program {self.program!r}"]
        problems, kv = check_argv(prog.flags, self.args, positionals=self.positionals, overrides=self.overrides)
        if self.target == "bridge":
            problems += _bridge_overrides(t, kv) + _bridge_recipe(t, self.args)
        elif t.extra("env") is not None:
            problems += _env_assignments(t, kv)
        elif kv:
            problems += [f"unexpected override {x!r}" for x in kv]
        if self.target == "torchtitan":
            problems += _torchtitan_config(t, self.args)
        return [f"{self.target} {t.version} {self.program}: {p}" for p in problems]


def _bridge_overrides(t: LaunchTarget, kv: list[str]) -> list[str]:
    out: list[str] = []
    over: dict[str, list[str]] = t.extra("overrides") or {}
    for item in kv:
        key, _, value = item.partition("=")
        if key == "mixed_precision":
            if value not in (t.extra("mixed_precision") or []):
                out.append(f"mixed_precision={value} is not a recorded preset")
            continue
        section, _, name = key.partition(".")
        if section not in over or name not in over[section]:
            out.append(f"unknown override {key} (not a recorded ConfigContainer field)")
    return out


def _env_assignments(t: LaunchTarget, kv: list[str]) -> list[str]:
    """``NAME=VALUE`` environment assignments a script target reads (its recorded ``env``): the name is one the
    script reads, the value of the recorded type or among the recorded choices."""
    env: dict[str, FlagSpec] = t.extra("env") or {}
    out: list[str] = []
    for item in kv:
        name, _, value = item.partition("=")
        if name not in env:
            out.append(f"unknown variable {name} (the pinned script does not read it)")
            continue
        kind, choices, _ = _spec_parts(env[name])
        p = _value_problem(name, value, kind, choices)
        if p:
            out.append(p)
    return out


def _bridge_recipe(t: LaunchTarget, args: Sequence[str]) -> list[str]:
    """The recipe is a recorded one and agrees with --mode and --dataset (run_recipe.py rejects mismatches)."""
    recipe, mode, dataset = _arg_after(args, "--recipe"), _arg_after(args, "--mode"), _arg_after(args, "--dataset")
    if recipe is None:
        return []
    out = [] if recipe in (t.extra("recipes") or []) else [f"--recipe {recipe} is not a recorded recipe"]
    task = "peft" if "_peft_" in recipe else "pretrain" if "_pretrain_" in recipe else None
    if mode and task and (task == "peft") != (mode in ("lora", "dora")):
        out.append(f"--mode {mode} does not match the {task} recipe {recipe}")
    if mode and dataset and (dataset == "mock") != (mode == "pretrain"):
        out.append(f"--dataset {dataset} does not train in --mode {mode}")
    return out


def _arg_after(args: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _torchtitan_config(t: LaunchTarget, args: Sequence[str]) -> list[str]:
    module, config = _arg_after(args, "--module"), _arg_after(args, "--config")
    if module is None or config is None:
        return ["--module and --config are both required"]
    configs: dict[str, list[str]] = t.extra("configs") or {}
    if config not in configs.get(module, []):
        return [f"--config {config} is not a config function of --module {module}"]
    return []


@dataclass(frozen=True)
class Command:
    """One process to start (a training launch, a serving pool, a router)."""

    role: str
    segments: tuple[Segment, ...]
    replicas: int = 1

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(a for s in self.segments for a in s.argv)

    def problems(self) -> list[str]:
        return [p for s in self.segments for p in s.problems()]

    def text(self) -> str:
        """The command, one flag (with its values) per line, joined by backslashes."""
        chunks: list[str] = []
        for seg in self.segments:
            cur = " ".join(quote(h) for h in seg.head)
            for a in seg.args:
                if _is_flag(a) or (seg.overrides and "=" in a):
                    chunks.append(cur)
                    cur = quote(a)
                else:
                    cur += " " + quote(a)
            chunks.append(cur)
        lines = [chunks[0]] + ["  " + c for c in chunks[1:]]
        return " \\\n".join(lines)


@dataclass(frozen=True)
class LaunchPlan:
    """What ``--emit`` prints for one plan: commands, the files they read, notes."""

    target: str
    commands: tuple[Command, ...]
    files: tuple[tuple[str, str], ...] = ()
    file_problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    title: str = ""

    @property
    def pinned(self) -> LaunchTarget:
        return target(self.target)

    def problems(self) -> list[str]:
        return [p for c in self.commands for p in c.problems()] + list(self.file_problems)

    def to_text(self) -> str:
        t = self.pinned
        when = f"released {t.released}" if t.released[:1].isdigit() else "release date not recorded"
        head = f"# {t.name} {t.version} (pinned in launch_targets.yaml; {when})"
        lines = [head] + ([f"# {self.title}"] if self.title else []) + [f"# note: {n}" for n in self.notes]
        lines += [f"# WARNING, not accepted by the pinned release: {p}" for p in self.problems()]
        for name, text in self.files:
            lines += [f"cat > {name} <<'EOF'", text.rstrip("\n"), "EOF"]
        for c in self.commands:
            if len(self.commands) > 1 or c.replicas > 1:
                lines.append(f"# {c.role}" + (f" (x{c.replicas})" if c.replicas > 1 else ""))
            lines.append(c.text())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        t = self.pinned
        return {
            "target": self.target, "name": t.name, "version": t.version, "released": t.released,
            "commands": [{"role": c.role, "replicas": c.replicas, "argv": list(c.argv),
                          "command": shell_join(c.argv)} for c in self.commands],
            "files": {name: text for name, text in self.files}, "notes": list(self.notes),
            "problems": self.problems(),
            "text": self.to_text(),
        }


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"
