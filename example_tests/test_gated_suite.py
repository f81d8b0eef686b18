"""A gated spec run, as CI would do it with `pytest --ncp-narrator=... --ncp-min-survival=0.4@20`.

Here the run goes through the same engine with the offline demo script as every model, so the test
can assert the gate's verdict and the paper's metrics end to end without a network.
"""

from __future__ import annotations

import asyncio

from pytest_ncp import Gate, RunConfig, Runner, compute_metrics, load_specs
from pytest_ncp.testing import install_demo_script

SPECS = ["caligari", "nosferatu", "metropolis", "the-general", "gold-rush", "dracula"]


def test_gate_over_a_spec_suite(ncp_model_server, specs_dir, tmp_path):
    install_demo_script(ncp_model_server)
    specs, errors = load_specs([specs_dir / f"{name}.yaml" for name in SPECS])
    assert not errors
    config = RunConfig(narrator="studio_narrator:StudioNarrator", auditor_model="openai/demo-auditor",
                       api_base=ncp_model_server.base_url, max_turns=12)
    results = asyncio.run(Runner(config, out_dir=tmp_path).run(specs))
    episodes = [r.record for r in results]
    metrics = compute_metrics(episodes, survival_turn=10)
    assert metrics["episodes"] == len(SPECS) and metrics["errors"] == 0
    verdict = Gate.parse("0.1@10").check(episodes)
    assert verdict.passed, verdict.line()
    assert not Gate.parse("1.0@10").check(episodes).passed or metrics["conflict_free"] == len(SPECS)
    assert (tmp_path / "results.json").exists()
