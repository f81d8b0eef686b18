"""The HTML report over a real run (scripted server, real traces): self-contained, every episode turn
by turn, and inert against markup in anything a narrator, player or file can put there."""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.core.config import RunConfig
from pytest_ncp.llm import ModelClient
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.report.html import find_quote, highlight, render_html, survival_chart, write_html
from pytest_ncp.report.runs import load_runs
from pytest_ncp.engine.runner import Runner
from pytest_ncp.core.spec import load_spec
from tests.conftest import FIXTURES, SPECS, ListNarrator

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
EVIL = SCRIPT + IMG
EVIL_SPEC_ID = "caligari" + IMG
RESPONSES = [f"The fair is loud. {SCRIPT} hums.", f"Cesare stirs {IMG} by the cabinet.", "Alan laughs, alive."]
INPUTS = [f"I listen. {EVIL}", f"I watch Cesare. {IMG}", "I go home."]


class Elements(HTMLParser):
    """Every element and attribute as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def elements(html_text: str) -> Elements:
    parser = Elements()
    parser.feed(html_text)
    return parser


def assert_inert(html_text: str) -> Elements:
    """No element or attribute that could run code or fetch anything came from the data."""
    found = elements(html_text)
    live = {"script", "img", "iframe", "frame", "object", "embed", "link", "base", "form", "video", "audio", "source"}
    assert not {t for t, _ in found.tags} & live
    # Only the report's own <meta> tags: an injected one could refresh the page elsewhere.
    assert all(set(a) <= {"charset", "http-equiv", "content", "name"} for a in found.named("meta"))
    assert len(found.named("meta")) == 4
    handlers = [(t, k) for t, a in found.tags for k in a if k.startswith("on")]
    assert handlers == []
    links = [a.get("href") for a in found.named("a")]
    assert all(h and h.startswith("#") for h in links), links
    assert not any("src" in a for _, a in found.tags)
    return found


@pytest.fixture
def evil_run(tmp_path, ncp_model_server) -> Path:
    """A two-episode run whose narration, player input, quotes, explanations and spec ids carry markup."""
    s = ncp_model_server
    s.add(step="conflict_check", contains="TURN 1.", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": SCRIPT, "explanation": "E1 " + EVIL}]})
    s.add(step="conflict_check", contains="TURN 2.", reply={"conflicts": [{
        "type": "commitment", "fact_ids": [], "commitment_ids": ["C1"], "quote": f"Cesare stirs {IMG}",
        "explanation": "E2 " + EVIL}]})
    s.add(step="conflict_confirmation", contains="TURN 2.", reply={"confirmed": True, "explanation": "C2 " + EVIL})
    s.add(step="conflict_confirmation", contains="TURN 1.", reply={"confirmed": False, "explanation": "R1 " + EVIL})
    s.add(step="fact_update", contains="TURN 1.", reply={"added": [{"text": "Fact " + EVIL, "quote": "The fair is loud"}],
                                                        "negated": []})
    # Not committed: turn 2 has a confirmed conflict, so the report must not mark it as a ledger change.
    s.add(step="fact_update", contains="TURN 2.", reply={"added": [{"text": "Cabinet.", "quote": "by the cabinet"}],
                                                        "negated": []})
    s.add(step="trajectory_update", contains="TURN 1.", reply={
        "trigger_event_occurred": True, "key_delta_occurred": True, "evidence": f"The fair is loud. {SCRIPT}"})

    spec = load_spec(FIXTURES / "caligari.yaml")
    out = tmp_path / "run"
    client = ModelClient(api_base=s.base_url, backoff=0.01, max_backoff=0.05)
    runner = Runner(RunConfig(narrator="tests:Evil" + IMG, narrator_model="openai/n", max_turns=5),
                    out_dir=out, narrator_factory=lambda: ListNarrator(RESPONSES),
                    auditor=LLMAuditor(client, "openai/auditor"),
                    player_factory=lambda _spec: ScriptedPlayer(INPUTS), client=client)
    asyncio.run(runner.run([spec]))

    path = out / "results.json"
    data = json.loads(path.read_text())
    (episode,) = data["episodes"]
    assert episode["termination"] == "conflict:commitment" and episode["turns"] == 2
    # Relative to the results folder, as a moved run folder would have it; and a hostile spec id.
    episode["trace"] = "traces/caligari--r0.jsonl"
    episode["spec_id"] = EVIL_SPEC_ID
    lost = {**episode, "spec_id": SCRIPT, "repeat": 1, "trace": "traces/gone.jsonl", "termination": "error",
            "failure": None, "error": {"kind": "auditor", "message": "M " + EVIL, "traceback": "T " + EVIL}}
    data["episodes"].append(lost)
    # The file lists the keys of its episodes (and, complete, the same as expected).
    data["expected"] = data["finished"] = sorted(f"{e['spec_id']}--r{e['repeat']}" for e in data["episodes"])
    path.write_text(json.dumps(data))
    (out / "reviews.json").write_text(json.dumps({"version": 1, "labels": [
        {"spec_id": EVIL_SPEC_ID, "repeat": 0, "turn": 2, "type": "commitment", "label": "dispute",
         "note": "N " + EVIL, "reviewer": "R " + EVIL, "date": "2026-01-01"}]}))
    return path


def test_report_shows_every_turn_with_verdicts_and_no_live_markup(evil_run, tmp_path):
    html_text = write_html([evil_run], tmp_path / "report.html").read_text()
    found = assert_inert(html_text)
    # Every injected string is there as text, escaped.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html_text
    for marker in ("E1 ", "E2 ", "R1 ", "C2 ", "Fact ", "loud. ", "M ", "T ", "N ", "R "):
        assert marker + "&lt;script&gt;" in html_text, marker

    episodes = [a for t, a in found.tags if t == "details" and "episode" in (a.get("class") or "")]
    assert len(episodes) == 2
    # Turn by turn: the player's input, the narration with the quotes marked, confirmed vs rejected.
    assert found.named("article") and len(found.named("article")) == 2
    assert '<mark class="q-rejected" title="flagged, rejected on confirmation">&lt;script&gt;alert(1)&lt;/script&gt;</mark>' in html_text
    assert ('<mark class="q-confirmed" title="confirmed conflict">Cesare stirs &#34;&gt;&lt;img src=x '
            'onerror=alert(1)&gt;</mark>') in html_text
    assert '<mark class="q-fact" title="source of a ledger change">The fair is loud</mark>' in html_text
    assert "</mark> by the cabinet." in html_text  # the uncommitted fact update of turn 2 stays unmarked
    assert ">CONFIRMED<" in html_text and ">REJECTED<" in html_text
    # Ledger diff, node progress i/N (caligari has 8 nodes) and the commitment lanes.
    assert "<code>+ F10</code> Fact &lt;script&gt;" in html_text
    assert "node 1/8" in html_text and "plot node 1 reached" in html_text
    lanes = [a["class"] for t, a in found.tags if t == "td" and (a.get("class") or "").startswith("s-")]
    # 6 own commitments and the 3 default world rules (W1-W3), over two turns.
    assert lanes.count("s-violated") == 1 and lanes.count("s-pending") == (6 + 3) * 2 - 1
    # The commitment text comes from the spec the trace names, the fact text from the trace.
    assert ('<code>C1</code> <span class="muted">invariant commitment:</span> Cesare acts only at '
            "Caligari&#39;s command") in html_text
    # The episode without a trace says so and still shows its error; the review label is shown.
    assert "trace not found: traces/gone.jsonl" in html_text
    assert "auditor error</b>" in html_text
    assert "review by R &lt;script&gt;" in html_text and "<b>dispute</b>" in html_text


def test_report_is_self_contained(evil_run, tmp_path):
    html_text = write_html([evil_run], tmp_path / "report.html").read_text()
    found = elements(html_text)
    csp = [a for a in found.named("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]["content"]
    assert not found.named("script") and not found.named("link")
    assert "http://" not in html_text and "https://" not in html_text
    assert "url(" not in html_text and "@import" not in html_text and "@font-face" not in html_text


def test_survival_curves_one_per_run_step_function(tmp_path):
    from pytest_ncp.analysis.results import build_results, write_results

    def episode(spec_id, termination, turns):
        failure = {"turn": turns, "type": "fact"} if termination.startswith("conflict") else None
        return EpisodeRecord.model_validate({
            "spec_id": spec_id, "repeat": 0, "termination": termination, "turns": turns, "failure": failure,
            "progress": 0, "satisfied": 0, "tokens": 0, "cost_usd": 0, "trace": None})

    a = write_results(tmp_path / "a", build_results({"narrator": "x:A", "max_turns": 4},
                                                    [episode("s1", "conflict:fact", 2), episode("s2", "turn_limit", 4)]))
    b = write_results(tmp_path / "b", build_results({"narrator": "x:B", "max_turns": 10},
                                                    [episode("s1", "turn_limit", 10)]))
    chart = survival_chart(load_runs([a, b]))
    first, second = chart["curves"]
    assert first["colour"] != second["colour"]
    assert (first["end"], first["final"], second["end"], second["final"]) == (4, 0.5, 10, 1.0)
    # S(t) = 1 until the drop at t = 2, then 0.5: exactly one vertical segment, at x(2).
    x2 = chart["left"] + (chart["right"] - chart["left"]) * 2 / 10
    assert first["d"].count("V") == 1 and f"H{round(x2, 2)} V" in first["d"]
    assert second["d"].count("V") == 0
    html_text = render_html(load_runs([a, b]))
    assert html_text.count('<path class="curve"') == 2
    assert ">turn t</text>" in html_text and ">survival S(t)</text>" in html_text


def test_find_quote_is_as_lenient_as_the_auditor_and_highlight_escapes():
    text = "He said \u201cNever\u201d.  Then   he LEFT the room... and wept."
    def found(quote):
        return [text[a:b] for a, b in find_quote(quote, text)]

    assert found('said "never".') == ["said \u201cNever\u201d."]
    assert found("then he left") == ["Then   he LEFT"]
    assert found("Then he ... and wept") == ["Then   he", "and wept"]
    assert found("He said ... wept") == []  # the elision would skip a negation ("Never")
    assert found("wept ... He said") == []  # pieces must come in order
    assert found("not there") == []
    marked = str(highlight("a <b> c", [("<b>", "confirmed"), ("a <b", "fact")]))
    assert marked == ('<mark class="q-fact" title="source of a ledger change">a </mark>'
                      '<mark class="q-confirmed" title="confirmed conflict">&lt;b&gt;</mark> c')


def test_unreadable_trace_lines_are_skipped_and_counted(evil_run, tmp_path):
    trace = evil_run.parent / "traces" / "caligari--r0.jsonl"
    trace.write_text(trace.read_text() + '{"event": "turn", "turn": 3, "resp')  # killed mid-write
    html_text = render_html(load_runs([evil_run]))
    assert "1 unreadable trace line(s) skipped" in html_text


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(evil_run, tmp_path):
    report = write_html([evil_run], tmp_path / "report.html")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000"]
    png = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={png}", report.as_uri()], capture_output=True, timeout=180, check=True)
    assert png.exists() and _png_size(png) == (1280, 2000)
    # A blank 1280x2000 page is about 8 KB of PNG; tables, curves and an open episode are far more.
    assert png.stat().st_size > 40_000

    dom = subprocess.run([*flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=180,
                         check=True).stdout
    found = assert_inert(dom)
    details = [a for t, a in found.tags if t == "details" and "episode" in (a.get("class") or "")]
    assert len(details) == 2 and len(found.named("article")) == 2
    assert len(found.named("mark")) >= 3 + 3  # three in the legend, three in the narration
    assert [a for t, a in found.tags if t == "path" and a.get("class") == "curve"]


def test_odd_trace_events_cost_their_own_details_not_the_report(tmp_path):
    from pytest_ncp.analysis.results import build_results, write_results

    traces = tmp_path / "run" / "traces"
    traces.mkdir(parents=True)
    events = [
        {"event": "start", "spec_id": "x", "spec_path": "nowhere.yaml", "ledger": "not a list"},
        {"event": "turn", "turn": 1, "verdicts": [1, 2], "commitments": "C1", "ledger_changes": "y",
         "node_index": "3", "response": None, "player_input": "hello"},
        {"event": "turn", "turn": 2, "response": "ok", "verdicts": {
            "conflict_check": {"conflicts": ["text", {"type": "fact", "quote": 5, "fact_ids": "F1"}]},
            "conflict_confirmation": [True], "trajectory_update": "yes", "commitment_check": {"satisfied": [1]}},
         "commitments": {"C1": "WEIRD"}, "node_index": 1},
        [1, 2],
    ]
    (traces / "x--r0.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    episode = {"spec_id": "x", "repeat": 0, "termination": "turn_limit", "turns": 2, "progress": 0.5,
               "satisfied": 0.0, "failure": None, "commitments": {"C1": "PENDING"}, "trace": "traces/x--r0.jsonl"}
    path = write_results(tmp_path / "run", build_results({"narrator": "x:Y", "max_turns": 2},
                                                         [EpisodeRecord.model_validate(episode)]))
    html_text = render_html(load_runs([path]))
    found = assert_inert(html_text)
    assert len(found.named("article")) == 2
    assert "1 unreadable trace line(s) skipped" in html_text
    assert 'class="s-unknown" title="C1 after turn 2: WEIRD"' in html_text
    assert ">REJECTED<" in html_text  # the one well-formed conflict, unconfirmed


def test_a_demo_run_is_marked_as_judging_no_real_model(evil_run, tmp_path):
    plain = write_html([evil_run], tmp_path / "plain.html").read_text()
    assert "Offline demo" not in plain
    data = json.loads(evil_run.read_text())
    data["config"]["demo"] = True
    evil_run.write_text(json.dumps(data))
    demo = write_html([evil_run], tmp_path / "demo.html").read_text()
    assert "Offline demo:" in demo and "they judge no real model" in demo
