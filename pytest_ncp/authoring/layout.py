"""YAML rendering: a spec as data, written in the layout of the bundled specs (block scalars, one line a fact)."""

from __future__ import annotations

import datetime as _dt
import json
import textwrap
from typing import Any, Mapping

WIDTH = 100


def yaml_scalar(value: Any, *, flow: bool = False) -> str:
    """One YAML scalar: plain when that reads back as the same string, double-quoted otherwise."""
    import yaml

    if value is None:
        return "null"
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    text = str(value)
    # Inside a flow collection "? " starts an explicit key, so such text must be quoted there.
    special = (",", "[", "]", "{", "}", "? ") if flow else ()
    plain = (
        text == text.strip() and text and "\n" not in text and ": " not in text and " #" not in text
        and not text.endswith(":") and text[0] not in "-?:,[]{}#&*!|>'\"%@`" and not any(c in text for c in special)
        and all(c.isprintable() for c in text)
    )
    if plain:
        try:
            plain = yaml.safe_load(text) == text
        except yaml.YAMLError:
            plain = False
    # A JSON string is a valid YAML double-quoted scalar (YAML's escapes are a superset of JSON's).
    return text if plain else json.dumps(text, ensure_ascii=False)


def _folded(text: str, indent: int) -> str:
    pad = " " * indent
    lines: list[str] = []
    for i, paragraph in enumerate(text.rstrip("\n").split("\n")):
        if i:
            lines.append("")
        lines.extend(pad + line for line in textwrap.wrap(paragraph, WIDTH - indent, break_long_words=False,
                                                         break_on_hyphens=False))
    return ">\n" + "\n".join(lines)


def _prose(text: Any, indent: int) -> str:
    if isinstance(text, str) and text.strip() and text.endswith("\n") and "\n\n" not in text:
        return _folded(text, indent)
    return yaml_scalar(text)


def _flow_list(items: Any) -> str:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return yaml_scalar(items) if not isinstance(items, (list, dict)) else json.dumps(items, ensure_ascii=False)
    return "[" + ", ".join(yaml_scalar(i, flow=True) for i in items) + "]"


def render_spec_yaml(data: Mapping[str, Any]) -> str:
    """A readable spec file (the layout of specs/caligari.yaml) that loads back to exactly ``data``.

    When some value cannot be laid out this way (an unexpected type from a model), the whole file
    falls back to ``yaml.safe_dump``: less pretty, still exact.
    """
    import yaml

    try:
        text = _layout(data)
        if yaml.safe_load(text) == data:
            return text
    except (yaml.YAMLError, TypeError, AttributeError, KeyError):
        pass
    return str(yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=WIDTH))


def _layout(data: Mapping[str, Any]) -> str:
    out: list[str] = []
    done: set[str] = set()

    def put(key: str, rendered: str, blank_before: bool = False) -> None:
        if blank_before:
            out.append("")
        out.append(f"{key}: {rendered}" if not rendered.startswith("\n") else f"{key}:{rendered}")
        done.add(key)

    for key in ("id", "title"):
        if key in data:
            put(key, yaml_scalar(data[key]))
    if isinstance(data.get("source"), dict):
        out.append("source:")
        out.extend(f"  {k}: {yaml_scalar(v)}" for k, v in data["source"].items())
        done.add("source")
    if "genres" in data:
        put("genres", _flow_list(data["genres"]))
    player = data.get("player")
    if isinstance(player, dict):
        out += ["", "player:"]
        for k, v in player.items():
            out.append(f"  {k}: {_prose(v, 4) if k == 'briefing' else yaml_scalar(v)}")
        done.add("player")
    if "synopsis" in data:
        put("synopsis", _prose(data["synopsis"], 2), blank_before=True)
    facts = data.get("initial_facts")
    if isinstance(facts, list) and all(isinstance(f, dict) for f in facts):
        out += ["", "initial_facts:"]
        for f in facts:
            out.append("  - {" + ", ".join(
                f"{k}: {json.dumps(v, ensure_ascii=False) if k == 'text' and isinstance(v, str) else yaml_scalar(v, flow=True)}"
                for k, v in f.items()) + "}")
        done.add("initial_facts")
    for key in ("commitments", "trajectory"):
        items = data.get(key)
        if isinstance(items, list) and all(isinstance(i, dict) and i for i in items):
            out += ["", f"{key}:"]
            for item in items:
                for n, (k, v) in enumerate(item.items()):
                    lead = "  - " if n == 0 else "    "
                    rendered = _flow_list(v) if isinstance(v, list) else yaml_scalar(v)
                    if k == "text":
                        rendered = json.dumps(v, ensure_ascii=False) if isinstance(v, str) else rendered
                    out.append(f"{lead}{k}: {rendered}")
            done.add(key)
    inputs = data.get("scripted_inputs")
    if isinstance(inputs, list):
        out += ["", "scripted_inputs:" + ("" if inputs else " []")]
        out.extend(f"  - {json.dumps(i, ensure_ascii=False) if isinstance(i, str) else yaml_scalar(i)}" for i in inputs)
        done.add("scripted_inputs")
    rest = {k: v for k, v in data.items() if k not in done and k != "review"}
    if rest:
        import yaml

        out += ["", yaml.safe_dump(rest, sort_keys=False, allow_unicode=True, width=WIDTH).rstrip("\n")]
    if "review" in data:
        out += ["", review_block(data["review"]).rstrip("\n")]
    return "\n".join(out) + "\n"


def review_block(review: Mapping[str, Any]) -> str:
    """``review: {status: draft}`` for drafts, a block mapping once someone has signed it."""
    if set(review) <= {"status"}:
        return "review: {" + ", ".join(f"{k}: {yaml_scalar(v, flow=True)}" for k, v in review.items()) + "}\n"
    return "review:\n" + "".join(f"  {k}: {_flow_list(v) if isinstance(v, list) else yaml_scalar(v)}\n"
                                  for k, v in review.items())
