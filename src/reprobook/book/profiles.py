"""Profiles and parameters: what a chapter may be run with, checked before anything runs.

A chapter's parameters are the literal assignments of its notebook cell tagged ``parameters``;
those defaults *are* the ``smoke`` profile. Its sidecar ``<slug>.yml`` overrides some of them for
``cpu`` and ``gpu``. Every override is checked against the defaults: an unknown name, a value of
the wrong type or an unknown profile is a :class:`ParameterError` that names it.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

__all__ = ["ParameterError", "read_parameters", "check_value", "resolve", "SMOKE", "PROFILES"]

SMOKE = "smoke"
#: The profiles a chapter may define (smoke is always its parameters cell).
PROFILES = (SMOKE, "cpu", "gpu")


class ParameterError(ValueError):
    """A bad profile, parameter name or parameter value for a chapter."""


def read_parameters(notebook: str | Path) -> dict[str, Any]:
    """The defaults of a notebook's ``parameters`` cell, as ``{name: literal value}``."""
    nb = json.loads(Path(notebook).read_text())
    cells = [c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ParameterError(f"{notebook}: expected exactly one cell tagged 'parameters', "
                             f"found {len(cells)}")
    src = "".join(cells[0]["source"]) if isinstance(cells[0]["source"], list) else cells[0]["source"]
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        raise ParameterError(f"{notebook}: parameters cell is not valid Python: {e}") from None
    params: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, (ast.Assign, ast.AnnAssign))):
            raise ParameterError(f"{notebook}: parameters cell line {node.lineno} is not an "
                                 "assignment; keep only `name = literal` lines there")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            raise ParameterError(f"{notebook}: parameters cell line {node.lineno}: assign one name")
        try:
            params[targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            raise ParameterError(f"{notebook}: parameter {targets[0].id!r} is not a literal "
                                 "(numbers, strings, booleans, None, lists)") from None
    for required in ("seed", "device", "profile"):
        if required not in params:
            raise ParameterError(f"{notebook}: parameters cell lacks {required!r}")
    return params


def _type_name(v: Any) -> str:
    return "None" if v is None else type(v).__name__


def check_value(name: str, value: Any, default: Any, where: str = "") -> Any:
    """Check ``value`` against the type of the parameter's ``default``; return it normalised."""
    prefix = f"{where}: " if where else ""
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    elif isinstance(default, (list, tuple)):
        if isinstance(value, (list, tuple)):
            return list(value)
    elif isinstance(default, dict):
        if isinstance(value, dict):
            return value
    raise ParameterError(f"{prefix}parameter {name!r} must be {_type_name(default)} "
                         f"(like its default {default!r}), got {_type_name(value)} {value!r}")


def resolve(defaults: dict[str, Any], profiles: dict[str, dict], profile: str,
            overrides: dict[str, Any] | None = None, where: str = "") -> dict[str, Any]:
    """The parameters to inject for ``profile`` plus ``overrides`` (e.g. from ``-p name=value``).

    Returns only what differs from the notebook's defaults, plus ``profile`` itself.
    """
    prefix = f"{where}: " if where else ""
    known = {SMOKE, *profiles}
    if profile not in known:
        raise ParameterError(f"{prefix}unknown profile {profile!r}; this chapter has "
                             f"{', '.join(sorted(known))}")
    merged: dict[str, Any] = {}
    layers = [(f"profile {profile!r}", profiles.get(profile, {}) or {}),
              ("command line", overrides or {})]
    for origin, layer in layers:
        for name, value in layer.items():
            if name == "profile":
                raise ParameterError(f"{prefix}set the profile with --profile, not as a parameter")
            if name not in defaults:
                raise ParameterError(f"{prefix}unknown parameter {name!r} ({origin}); the chapter's "
                                     f"parameters are {', '.join(sorted(defaults))}")
            merged[name] = check_value(name, value, defaults[name], where=prefix.rstrip(": "))
    merged["profile"] = profile
    return merged


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``name=value`` from the command line; the value is a Python/YAML literal or a string."""
    if "=" not in text:
        raise ParameterError(f"parameter override {text!r} must look like name=value")
    name, raw = text.split("=", 1)
    name = name.strip()
    if not name.isidentifier():
        raise ParameterError(f"parameter override {text!r}: {name!r} is not a parameter name")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = {"true": True, "false": False, "none": None}.get(raw.strip().lower(), raw)
    return name, value
