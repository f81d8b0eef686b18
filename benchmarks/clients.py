"""CPU per call: litellm vs openai SDK vs httpx against the scripted server in a child process."""
import asyncio, os, sys, time, multiprocessing
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, "/work/wt-speed")
from pytest_ncp.testing import ScriptedModelServer

def serve(q):
    s = ScriptedModelServer().start(); q.put(s.base_url)
    while True: time.sleep(3600)

N = 300
MSG = [{"role": "user", "content": "hello " * 200}]

async def httpx_run(base):
    import httpx, json
    async with httpx.AsyncClient(base_url=base, timeout=60) as c:
        async def one():
            r = await c.post("/chat/completions", json={"model": "m", "messages": MSG},
                             headers={"Authorization": "Bearer x", "X-NCP-Role": "narrator"})
            d = json.loads(r.content); return d["choices"][0]["message"]["content"]
        await one()
        t0 = time.process_time()
        for _ in range(N): await one()
        return (time.process_time() - t0) / N * 1000

async def openai_run(base):
    from openai import AsyncOpenAI
    c = AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
    async def one():
        r = await c.chat.completions.create(model="m", messages=MSG, extra_headers={"X-NCP-Role": "narrator"})
        return r.choices[0].message.content
    await one()
    t0 = time.process_time()
    for _ in range(N): await one()
    return (time.process_time() - t0) / N * 1000

async def litellm_run(base):
    import litellm
    async def one():
        r = await litellm.acompletion(model="openai/m", messages=MSG, api_base=base, api_key="x", num_retries=0,
                                      extra_headers={"X-NCP-Role": "narrator"})
        return r.choices[0].message.content
    await one()
    t0 = time.process_time()
    for _ in range(N): await one()
    return (time.process_time() - t0) / N * 1000

if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork"); q = ctx.Queue()
    p = ctx.Process(target=serve, args=(q,), daemon=True); p.start(); base = q.get()
    for name, fn in [("httpx", httpx_run), ("openai", openai_run), ("litellm", litellm_run)]:
        print(name, f"{asyncio.run(fn(base)):.2f} ms CPU/call", os.getloadavg())
    p.terminate()
