"""Structured answers: ask a model for JSON, check the answer, and ask again with the problems spelled out.

The one retry loop of the project: the auditor's steps, the model-assisted lint checks and spec drafting
all go through ``ask_json``; each brings its own parser (strict, failing closed) and its own way of
asking again. Most invalid answers are near misses, so the next attempt is told exactly what was wrong.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

if TYPE_CHECKING:
    from .client import ModelClient
    from .request import CacheBreak
    from .types import Completion, Role

T = TypeVar("T")
Messages = list[dict[str, Any]]


class NoValidAnswer(Exception):
    """No attempt gave a usable answer: ``problems`` of the last one, the text of every one in ``answers``."""

    def __init__(self, problems: Sequence[str], answers: Sequence[str]):
        self.problems, self.answers = list(problems), list(answers)
        super().__init__("; ".join(self.problems))


def strip_fences(text: str | None) -> str:
    """The JSON inside a markdown code fence; some servers wrap it so even in structured mode."""
    m = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text or "", re.S)
    return m.group(1) if m else (text or "")


def ask_again(hint: str) -> Callable[[Messages, Completion, list[str]], Messages]:
    """The usual retry: the conversation goes on with the invalid answer and what is wrong with it."""
    def retry(messages: Messages, completion: Completion, problems: list[str]) -> Messages:
        return [*messages, {"role": "assistant", "content": completion.text},
                {"role": "user", "content": "That answer is invalid: " + "; ".join(problems) + hint}]

    return retry


async def ask_json(client: ModelClient, role: Role, model: str, messages: Messages, *,
                   parse: Callable[[Completion], tuple[T | None, list[str]]], attempts: int,
                   retry: Callable[[Messages, Completion, list[str]], Messages],
                   step: str | None = None, response_format: dict[str, Any] | None = None,
                   temperature: float | None = None,
                   on_answer: Callable[[int, Completion, list[str]], None] | None = None,
                   cache_breaks: Sequence[CacheBreak] = ()) -> T:
    """The first answer ``parse`` accepts, after at most ``attempts`` calls; else ``NoValidAnswer``.

    ``parse`` returns (value, []) or (None, problems); ``retry`` gives the messages of the next attempt;
    ``on_answer(attempt, completion, problems)`` sees every answer (problems empty when accepted).
    """
    answers: list[str] = []
    problems: list[str] = []
    for attempt in range(1, attempts + 1):
        completion = await client.complete(role, model, messages, step=step, response_format=response_format,
                                           temperature=temperature, cache_breaks=cache_breaks)
        answers.append(completion.text)
        value, problems = parse(completion)
        if on_answer is not None:
            on_answer(attempt, completion, [] if value is not None else problems)
        if value is not None:
            return value
        messages = retry(messages, completion, problems)
    raise NoValidAnswer(problems, answers)
