"""List prices from litellm's cost map, cached prompt tokens from every usage shape, and the prompt bound
the cost cap reserves with (``pytest_ncp/llm/prices.py``)."""

from __future__ import annotations

import pytest

from pytest_ncp.llm.prices import Price, price_of, prompt_token_bound
from pytest_ncp.llm.types import cached_tokens


def test_a_priced_model_is_found_with_or_without_its_provider():
    price = price_of("openai/gpt-4o-mini")
    assert price is not None and price == price_of("gpt-4o-mini")
    assert price.input > 0 and price.output > price.input and 0 < price.cached_input < price.input


@pytest.mark.parametrize("model", ["openai/demo-auditor", "openai/gemma", "hosted_vllm/my-model"])
def test_a_model_the_cost_map_does_not_know_has_no_price(model):
    assert price_of(model) is None


def test_a_local_model_the_map_lists_at_zero_is_priced_free():
    assert price_of("ollama/llama3.1") == Price(0.0, 0.0, 0.0)  # a price: it can never cost anything


def test_a_price_bounds_a_call_and_discounts_cached_tokens():
    price = Price(input=1e-6, output=4e-6, cached_input=0.25e-6)
    assert price.cost(1000, 100) == pytest.approx(1000e-6 + 400e-6) == price.bound(1000, 100)
    assert price.cost(1000, 100, cached_tokens=800) == pytest.approx(200e-6 + 800 * 0.25e-6 + 400e-6)
    assert price.cost(10, 0, cached_tokens=50) == pytest.approx(10 * 0.25e-6)  # never more cached than prompt


@pytest.mark.parametrize("usage, cached", [
    ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}}, 64),       # OpenAI
    ({"prompt_tokens": 100, "cache_read_input_tokens": 70}, 70),                         # Anthropic, as sent
    ({"prompt_tokens": 100, "prompt_cache_hit_tokens": 30}, 30),                         # DeepSeek, as sent
    ({"prompt_tokens": 100, "prompt_tokens_details": None}, 0),
    ({"prompt_tokens": 100}, 0),
    ({}, 0),
])
def test_cached_tokens_from_every_usage_block(usage, cached):
    assert cached_tokens(usage) == cached


def test_cached_tokens_from_litellms_usage_object():
    """litellm maps Anthropic's cache reads into prompt_tokens_details.cached_tokens: read either way."""
    from pytest_ncp.llm import import_litellm

    Usage = import_litellm().types.utils.Usage
    assert cached_tokens(Usage(prompt_tokens=500, completion_tokens=5, cache_read_input_tokens=256)) == 256
    assert cached_tokens(Usage(prompt_tokens=500, completion_tokens=5,
                               prompt_tokens_details={"cached_tokens": 128})) == 128
    assert cached_tokens(Usage(prompt_tokens=500, completion_tokens=5)) == 0


def test_the_prompt_bound_is_at_least_the_bytes_of_every_message():
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Caf\u00e9 \u2014 \U0001f600"}]
    assert prompt_token_bound(messages) >= len("Rules.") + len("Caf\u00e9 \u2014 \U0001f600".encode()) + 2
