"""No credential reaches results.json, traces, report.html, JUnit XML or the terminal."""

from __future__ import annotations

import pytest

from pytest_ncp.core.redact import scrub, url_secrets

PASSWORD = "hunter2hunter2"


def test_a_password_in_the_endpoint_url_is_written_nowhere(project, monkeypatch):
    monkeypatch.setenv("NCP_TEST_PASSWORD", "s3cr3t-from-the-env")
    base = project.server.base_url.replace("http://", f"http://admin:{PASSWORD}@")
    out, xml = project.pytester.path / "out", project.pytester.path / "junit.xml"
    args = project.args(f"--ncp-report={out}", f"--junitxml={xml}", "--ncp-max-error-rate=1", "-vv")
    args = [a for a in args if not a.startswith("--ncp-api-base=")] + [f"--ncp-api-base={base}"]
    result = project.pytester.runpytest(*args)
    written = [p for p in (out.rglob("*") if out.exists() else []) if p.is_file()] + [xml]
    assert (out / "results.json").exists() and xml.exists()
    for path in written:
        assert PASSWORD not in path.read_text(encoding="utf-8", errors="replace"), path
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    assert "admin" not in (out / "results.json").read_text()


@pytest.mark.parametrize("text,secret", [
    ("GET https://admin:hunter2hunter2@proxy.example/v1/chat failed", "hunter2hunter2"),
    ("headers: {'Authorization': 'Basic YWRtaW46aHVudGVyMg=='}", "YWRtaW46aHVudGVyMg=="),
    ("Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
    ("https://x.azure.com/openai?api-version=2024&subscription-key=0123abcd4567", "0123abcd4567"),
    ("https://store/blob?sv=2024&sig=Zm9vYmFyYmF6&se=2026", "Zm9vYmFyYmF6"),
    ("https://host/v1?x-goog-api-key=AIzaXXXXXXXXXXXXXXXXXXXXXXX", "AIzaXXXX"),
    ("ocp-apim-subscription-key: 0123abcd4567", "0123abcd4567"),
])
def test_credentials_of_every_common_shape_are_scrubbed(text, secret):
    assert secret not in scrub(text)


def test_a_configured_key_and_the_urls_userinfo_are_scrubbed_whatever_their_shape():
    extra = ("plainkeyvalue", *url_secrets("http://admin:p%40ssword@host/v1"))
    message = "upstream said: bad credentials plainkeyvalue for admin / p@ssword"
    cleaned = scrub(message, extra=extra)
    assert "plainkeyvalue" not in cleaned and "p@ssword" not in cleaned


def test_prose_is_left_alone():
    for text in ("basic validation failed", "the token is valid", "the key to the door", "Authorization: ***"):
        assert scrub(text) == text
