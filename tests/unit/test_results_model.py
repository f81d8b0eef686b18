"""results.json as one typed model: documented fields, one loader with checks, older versions, the doc.

``python -m tests.unit.test_results_model`` rewrites the field reference in docs/results.md from the model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from pytest_ncp.analysis import results as R
from pytest_ncp.core import records
from pytest_ncp.analysis.results import (
    RESULTS_VERSION, RunResults, build_results, load_results, parse_results, split_key, write_results,
)
from pytest_ncp.core.config import RunConfig, episode_key
from pytest_ncp.core.traces import RunFileError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- fields: generated from pytest_ncp/analysis/results.py -->", "<!-- end of fields -->"


def ep(spec_id, termination="turn_limit", turns=4, repeat=0, **extra):
    failure = ({"turn": turns, "type": termination.split(":")[1], "fact_ids": ["F1"], "commitment_ids": [],
                "quote": "q", "explanation": "e", "confirmation": "c"} if termination.startswith("conflict:") else None)
    return {"spec_id": spec_id, "repeat": repeat, "termination": termination, "turns": turns, "progress": 0.5,
            "satisfied": 0.0, "failure": failure,
            "error": {"kind": "auditor", "message": "bad"} if termination == "error" else None, **extra}


def rec(spec_id, termination="turn_limit", turns=4, repeat=0, **extra):
    """The typed record the engine produces."""
    return records.EpisodeRecord.model_validate(ep(spec_id, termination, turns, repeat, **extra))


# A results.json as the version-1 writer (before the model) left it, trimmed to two episodes.
VERSION_1 = {
    "version": 1,
    "config": {"narrator": "agent:Narrator", "auditor_model": "openai/gpt-4o-mini", "max_turns": 4, "repeats": 1,
               "survival_turn": 4, "prompt_version": "ncp-prompts/3", "models": {"narrator": None, "player": None,
               "auditor": "openai/gpt-4o-mini"}, "fingerprint": "db880e9fe5f193b1", "structured_output_used": {}},
    "episodes": [
        {**ep("a", "conflict:fact", 3), "held": None, "spec_fingerprint": "f0", "commitments": {"C1": "VIOLATED"},
         "nodes_reached": 0, "nodes": [], "tokens": 120, "cost_usd": 0.0, "trace": "traces/a--r0.jsonl",
         "speculative": {"calls": 0, "tokens": 0, "cost_usd": 0.0}, "truncated_calls": 0, "structured_output": {}},
        {**ep("b", "turn_limit", 4), "commitments": {"C1": "PENDING"}, "tokens": 200, "trace": "traces/b--r0.jsonl"},
    ],
    "metrics": {"episodes": 2, "survival_at_20": None, "written_by": "an older pytest-ncp"},
}


# --- the model -----------------------------------------------------------------------------------------


def models() -> list[type[BaseModel]]:
    bases = (R._Record, records._Record)
    found = [m for m in [*vars(R).values(), *vars(records).values()]
             if isinstance(m, type) and issubclass(m, bases) and m not in bases]
    return list(dict.fromkeys(found))


def test_every_field_of_every_record_is_documented():
    undocumented = [f"{m.__name__}.{name}" for m in models() for name, f in m.model_fields.items()
                    if not (f.description or "").strip()]
    assert not undocumented
    assert all((m.__doc__ or "").strip() for m in models())


def test_every_run_setting_has_a_documented_field():
    # RunConfig.to_dict() is what runs record; a setting added there without a field here would go undocumented.
    recorded = set(RunConfig(narrator="x:Y").to_dict())
    assert recorded - set(R.RunConfigRecord.model_fields) == set()


def test_episode_keys_split_back():
    for spec_id, repeat in [("caligari", 0), ("a--rb", 12), ("x-r1", 3), ("x--r1", 0)]:
        assert split_key(episode_key(spec_id, repeat)) == (spec_id, repeat)
    with pytest.raises(ValueError, match="not an episode key"):
        split_key("caligari")


# --- building: complete means complete ----------------------------------------------------------------


def test_a_run_is_complete_only_when_it_ended_with_every_expected_episode():
    expected = ["a--r0", "b--r0"]
    running = build_results({}, [rec("a")], expected=expected, stopped="running")
    assert (running.complete, running.stopped, running.missing) == (False, "running", ["b--r0"])
    cut = build_results({}, [rec("a")], expected=expected)  # ended, but b never finished (a dead worker)
    assert (cut.complete, cut.stopped) == (False, "unfinished")
    assert "1 of 2 expected episode(s) finished" in cut.incompleteness()
    interrupted = build_results({}, [rec("a"), rec("b")], expected=expected, stopped="interrupted")
    assert not interrupted.complete
    done = build_results({}, [rec("b"), rec("a")], expected=expected)
    assert done.complete and done.stopped is None and done.finished == expected and done.incompleteness() is None
    assert [e.spec_id for e in done.episodes] == ["a", "b"]


def test_a_file_that_claims_complete_with_episodes_missing_is_refused(tmp_path):
    data = build_results({}, [rec("a"), rec("b")]).document()
    data["episodes"] = data["episodes"][:1]  # the failing episode deleted by hand
    data["finished"] = ["a--r0"]
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(RunFileError, match=r"results.json: 'complete' is true but 1 expected episode\(s\) are "
                                           r"missing \(first: b--r0\)"):
        load_results(tmp_path)


def test_records_are_checked_and_traces_written_relative_to_the_folder(tmp_path):
    out = tmp_path / "run"
    path = write_results(out, build_results({}, [rec("a", trace=str(out / "traces" / "a--r0.jsonl"))]))
    assert json.loads(path.read_text())["episodes"][0]["trace"] == "traces/a--r0.jsonl"
    with pytest.raises(ValidationError, match="termination"):
        rec("a", termination="crashed")
    with pytest.raises(ValidationError, match="frozen"):
        rec("a").turns = 3  # a record is what happened: readers share it
    assert not list(out.glob(".*.tmp"))


# --- loading -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content, message", [
    (None, r"run/results.json: no such file; give the results.json written by"),
    ('{"version": 2, "episodes": [', r"run/results.json:1: not valid JSON \(Expecting value\)"),
    ('[1, 2]', r"run/results.json: not an ncp results file: expected an object with an 'episodes' list"),
    ('{"version": 4, "episodes": []}', r"run/results.json: results version 4 is not supported \(this "
                                       r"pytest-ncp reads versions 1, 2, 3\)"),
    ('{"version": "2", "episodes": []}', r"results version '2' is not supported"),
    ('{"version": 2, "episodes": []}', r"run/results.json: missing 'complete', 'metrics'; give the results.json"),
    (json.dumps({"version": 1, "episodes": [{"spec_id": "a", "repeat": 0, "turns": 3}]}),
     r"run/results.json: episodes\[0\]: missing 'termination', 'progress', 'satisfied'"),
    (json.dumps({"version": 1, "episodes": [ep("a", turns=True)]}),
     r"run/results.json: episodes\[0\]\.turns: expected a whole number, got True"),
    (json.dumps({"version": 1, "episodes": [ep("a", "conflict:fact", failure={"turn": 2, "type": "plot"})]}),
     r"episodes\[0\]\.failure\.type: expected one of 'fact', 'commitment' or 'player_input', got 'plot'"),
])
def test_the_loader_names_the_file_and_what_is_wrong(tmp_path, content, message):
    (tmp_path / "run").mkdir()
    if content is not None:
        (tmp_path / "run" / "results.json").write_text(content)
    with pytest.raises(RunFileError, match=message):
        load_results(tmp_path / "run")


def test_version_1_files_still_load_and_say_completeness_was_not_recorded(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(VERSION_1))
    run = load_results(tmp_path / "results.json")
    assert run.version == RESULTS_VERSION == 3
    assert (run.complete, run.stopped, run.expected, run.finished) == (False, "unrecorded", [], ["a--r0", "b--r0"])
    assert "did not record completeness (results version 1)" in run.incompleteness()
    # The stored figures of version 1 were written by hand; they are recomputed from the episodes.
    assert run.metrics.episodes == 2 and run.metrics.survival_turn == 4 and run.metrics.conflict_rates["fact"] == 0.5
    assert run.episodes[0].failure.fact_ids == ["F1"] and run.episodes[1].trace == "traces/b--r0.jsonl"
    assert run.config.fingerprint == "db880e9fe5f193b1"
    # ... and written back as the current version.
    again = parse_results(json.loads(json.dumps(run.document())), "again")
    assert again == run


def test_version_2_files_load_unchanged(tmp_path):
    # Version 3 stores the same fields: a version 2 file reads as it is, and is written back as version 3.
    v3 = build_results({"narrator": "x:Y"}, [rec("a", "conflict:fact", 2), rec("b", "error", 1)]).document()
    (tmp_path / "results.json").write_text(json.dumps({**v3, "version": 2}))
    run = load_results(tmp_path)
    assert run.version == 3 and run.document() == v3
    assert [e.ending for e in run.episodes] == [records.Ending.CONFLICT_FACT, records.Ending.AUDITOR_ERROR]


def test_fields_this_version_does_not_know_are_kept(tmp_path):
    # Room to grow: a later field (the spent budget, the owners...) or a tool's own key loads,
    # and goes back out unchanged when the file is rewritten (ncp merge).
    data = build_results({"narrator": "x:Y"}, [rec("a", owner="narrator")]).document()
    data["budget"] = {"max_cost_usd": 2.0, "spent_usd": 1.2}
    data["config"]["max_cost"] = 2.0
    run = parse_results(data, "x")
    assert run.document()["budget"] == {"max_cost_usd": 2.0, "spent_usd": 1.2}
    assert run.episodes[0].model_dump()["owner"] == "narrator" and run.config.model_dump()["max_cost"] == 2.0


def test_a_document_round_trips_through_the_model():
    run = build_results({"narrator": "x:Y", "max_turns": 4}, [rec("a", "conflict:fact", 2), rec("b", "error", 1)],
                        survival_turn=4, shard={"index": 1, "count": 2},
                        canaries={"k": 2, "seed": 0, "model": "m", "min_recall": 0.8, "violations": 1, "caught": 1,
                                  "clean": 1, "passed": 1, "invalid": 0, "recall": 1.0, "clean_rate": 1.0, "ok": True,
                                  "cases": [{"case": "c1", "spec": "s", "violation": True, "outcome": "caught"}]})
    assert parse_results(json.loads(json.dumps(run.document())), "x").document() == run.document()
    assert run.metrics.model_dump()["survival_at_4"] == run.metrics.survival_point.value


# --- the schema and the doc ----------------------------------------------------------------------------


def test_ncp_schema_results_prints_the_models_schema(capsys):
    from pytest_ncp.cli import main

    assert main(["schema", "--results"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == json.loads(json.dumps(R.results_json_schema()))
    assert schema["title"] == "pytest-ncp results.json" and "complete" in schema["required"]
    episode = schema["$defs"]["EpisodeRecord"]["properties"]
    assert episode["termination"]["enum"][0] == "conflict:fact" and episode["turns"]["description"]


def reference_markdown() -> str:
    """The field reference of docs/results.md, from the model: one table per record."""
    order = [R.RunResults, R.RunConfigRecord, R.Models, R.EpisodeRecord, R.Failure, R.Agreement, R.ErrorRecord,
             R.PlayerFault, R.ScreenProblem, R.Screening, R.NodeReached, R.FlagCounts, R.SpeculativeUsage,
             R.ForkOrigin, R.Metrics, R.SurvivalPoint, R.Blame, R.BlameRow, R.Canaries, R.CanaryCase, R.ShardRecord,
             R.MergeRecord, R.SequentialRecord, R.SequentialOutcome, R.SequentialGateRecord, R.PairedRecord,
             R.MergedSequentialRecord, R.Provenance, R.VerdictRecord, R.VerdictCheck]
    assert set(order) == set(models()), "a new record: add it to the doc's order"
    schema = R.results_json_schema()
    defs = schema["$defs"]
    out = []
    for m in order:
        props = (schema if m is R.RunResults else defs[m.__name__])["properties"]
        doc = " ".join((m.__doc__ or "").split())
        out += [f"### `{m.__name__}`", "", doc, "", "| field | type | |", "|---|---|---|"]
        for name, f in m.model_fields.items():
            required = "required" if f.is_required() else "optional"
            out.append(f"| `{name}` | {_type(props[name])} ({required}) | {f.description} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _type(prop: dict) -> str:
    if "$ref" in prop:
        return f"`{prop['$ref'].rsplit('/', 1)[1]}`"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"object of {_type(prop['additionalProperties'])}"
    return {"integer": "int", "number": "number", "string": "str", "boolean": "bool", "null": "null"}.get(kind, kind)


def test_docs_results_md_is_the_models_reference():
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{DOC}: the generated block is marked by {BEGIN} ... {END}"
    current = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert current == reference_markdown(), "docs/results.md is stale: python -m tests.unit.test_results_model"
    # The prose names the version the model writes.
    assert re.search(rf"\bversion {RESULTS_VERSION}\b", text.split(BEGIN, 1)[0])


if __name__ == "__main__":  # regenerate the reference block of docs/results.md
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{BEGIN}\n\n{reference_markdown()}\n{END}{tail}", encoding="utf-8")
    print(f"wrote {DOC}")
