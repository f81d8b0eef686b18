"""CPU per call of the candidate HTTP clients for the lean path, against the scripted server in a child process.

    python benchmarks/clients.py            # sequential calls, then 120 calls in flight at a time

Sequential calls show a client's fixed cost; 120 in flight (24 episodes x 5 calls) shows how its
connection pool scales, which is what a run with many concurrent episodes pays.
"""
import asyncio
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_ncp.testing import ScriptedModelServer  # noqa: E402

N = int(os.environ.get("CALLS", "600"))
MSG = [{"role": "user", "content": "hello " * 200}]
HEADERS = {"Authorization": "Bearer x", "X-NCP-Role": "narrator", "Content-Type": "application/json"}


def serve(q, latency):
    s = ScriptedModelServer(latency=latency).start()
    q.put(s.base_url)
    while True:
        time.sleep(3600)


async def measure(one, inflight):
    await one()
    sem = asyncio.Semaphore(inflight)

    async def bounded():
        async with sem:
            await one()

    t0 = time.process_time()
    await asyncio.gather(*(bounded() for _ in range(N)))
    return (time.process_time() - t0) / N * 1000


async def with_httpx(base, inflight):
    import httpx

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None)) as c:
        async def one():
            r = await c.post(base + "/chat/completions", content=json.dumps({"model": "m", "messages": MSG}).encode(),
                             headers=HEADERS)
            return json.loads(r.content)["choices"][0]["message"]["content"]
        return await measure(one, inflight)


async def with_aiohttp(base, inflight):
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as c:
        async def one():
            async with c.post(base + "/chat/completions", data=json.dumps({"model": "m", "messages": MSG}).encode(),
                              headers=HEADERS) as r:
                return json.loads(await r.read())["choices"][0]["message"]["content"]
        return await measure(one, inflight)


async def with_openai(base, inflight):
    from openai import AsyncOpenAI

    c = AsyncOpenAI(base_url=base, api_key="x", max_retries=0)

    async def one():
        r = await c.chat.completions.create(model="m", messages=MSG, extra_headers={"X-NCP-Role": "narrator"})
        return r.choices[0].message.content
    return await measure(one, inflight)


async def with_litellm(base, inflight):
    import litellm

    async def one():
        r = await litellm.acompletion(model="openai/m", messages=MSG, api_base=base, api_key="x", num_retries=0,
                                      extra_headers={"X-NCP-Role": "narrator"})
        return r.choices[0].message.content
    return await measure(one, inflight)


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=serve, args=(q, 0.05), daemon=True)
    p.start()
    base = q.get()
    print(f"{'client':<10} {'1 in flight':>14} {'120 in flight':>14}   (ms CPU per call, load {os.getloadavg()[0]:.1f})")
    for name, fn in [("httpx", with_httpx), ("aiohttp", with_aiohttp), ("openai", with_openai),
                     ("litellm", with_litellm)]:
        one = asyncio.run(fn(base, 1))
        many = asyncio.run(fn(base, 120))
        print(f"{name:<10} {one:>14.2f} {many:>14.2f}")
    p.terminate()
