"""Sizes in tokens: the auditor model's own tokenizer where litellm knows it offline, a safe bound otherwise."""

from __future__ import annotations

from pytest_ncp.llm import ModelError
from pytest_ncp.llm.tokens import context_refusal, context_tokens, count_tokens, token_bound

HIEROGLYPHS = "\U00013000" * 7990


def test_the_bound_never_undercounts_a_byte_level_tokenizer():
    assert token_bound(HIEROGLYPHS) == 4 * 7990  # four UTF-8 bytes each
    assert token_bound("Tom is dead.") == 6      # two ASCII characters a token


def test_an_openai_auditor_is_counted_with_its_tokenizer_offline():
    tokens, exact = count_tokens("openai/gpt-4o-mini", HIEROGLYPHS)
    assert exact and tokens > 7990 * 3  # about 32,000: far over any limit counted in characters
    assert count_tokens("openai/gpt-4o-mini", "Tom is dead and buried in the old mill.")[0] < 15


def test_an_unknown_model_gets_the_bound_and_no_window():
    assert count_tokens("openai/my-own-auditor", "Tom is dead.") == (6, False)
    assert context_tokens("openai/my-own-auditor") is None
    assert context_tokens("openai/gpt-4o-mini") == 128000


def test_context_refusals_are_recognised_in_the_words_endpoints_use():
    for said in ("This model's maximum context length is 4096 tokens", "prompt is too long: 210000 tokens > 200000",
                 "the request exceeds the available context size, try increasing n_ctx"):
        assert context_refusal(ModelError(said))
    assert not context_refusal(ModelError("rate limit reached"))
