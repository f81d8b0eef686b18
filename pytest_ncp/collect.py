"""Spec files as pytest nodes: one episode test per (spec, repeat), one test per commitment.

Every test of a spec reads the same episode, which runs once per session (``NcpSession``). Outcomes:
a confirmed conflict fails the episode test; a violated commitment, or an achievement not satisfied
by the end, fails that commitment's test; auditor, model and narrator errors raise in ``setup`` and
so are pytest *errors*, never failures. Under a survival gate, conflicts are xfailed instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import pytest

from .options import MARKER, PROPERTY_PREFIX

if TYPE_CHECKING:
    from .episode import EpisodeResult
    from .session import NcpSession
    from .spec import NarrativeSpec


class NarrativeFailure(AssertionError):
    """A narrator broke a commitment: the message is the whole failure text, headline first."""


class EpisodeError(Exception):
    """The episode could not be judged (auditor, model or narrator error)."""


class SpecInvalid(Exception):
    """A spec file failed validation; the message lists path:line: field: message."""


def _key(spec_id: str, repeat: int, repeats: int) -> str:
    return spec_id if repeats == 1 else f"{spec_id}-r{repeat}"


class SpecFile(pytest.File):
    """A YAML spec. Collected by the plugin from ``--ncp-specs``, not from pytest's own arguments."""

    ncp: NcpSession

    def collect(self) -> Iterable[pytest.Item]:
        from .spec import SpecError, load_spec

        try:
            spec = load_spec(self._display_path())
            self.ncp.claim_id(spec)
        except SpecError as exc:
            yield InvalidSpecItem.from_parent(self, name="spec", message=str(exc))
            return
        repeats = self.ncp.settings.run.repeats
        for repeat in range(repeats):
            key = _key(spec.id, repeat, repeats)
            yield EpisodeItem.from_parent(self, name=f"episode[{key}]", spec=spec, repeat=repeat)
            for index, commitment in enumerate(spec.commitments):
                yield CommitmentItem.from_parent(self, name=f"commitment[{key}:{commitment.id}]", spec=spec,
                                                 repeat=repeat, commitment_id=commitment.id, index=index)


    def _display_path(self) -> Path:
        # Headlines name the spec as the user would type it: relative to where pytest was started.
        here = Path(self.config.invocation_params.dir)
        try:
            return self.path.relative_to(here)
        except ValueError:
            return self.path


class _SpecItem(pytest.Item):
    def __init__(self, *, spec: NarrativeSpec, repeat: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec, self.repeat = spec, repeat
        self.add_marker(MARKER)
        # pytest-xdist (--dist loadgroup, which the plugin selects) keeps a spec's tests on one worker.
        self.add_marker(pytest.mark.xdist_group(f"ncp:{spec.id}:{repeat}"))
        self.result: EpisodeResult | None = None

    @property
    def ncp(self) -> NcpSession:
        return self.parent.ncp  # type: ignore[union-attr]

    def setup(self) -> None:
        self.result = self.ncp.result(self.spec, self.repeat)
        self._properties(self.result)
        if self.result.error:
            from .report.text import headline

            raise EpisodeError(f"{headline(self.result)}\n\n{self.result.error.message}"
                               + (f"\n\n{self.result.error.traceback}" if self.result.error.traceback else "")
                               + (f"\n\ntrace: {self.result.trace}" if self.result.trace else ""))

    def _properties(self, result: EpisodeResult) -> None:
        pass

    def _fail(self, text: str, headline: str) -> None:
        if self.ncp.settings.gate is not None:
            pytest.xfail(headline)
        raise NarrativeFailure(text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, (NarrativeFailure, EpisodeError)):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


class EpisodeItem(_SpecItem):
    def _properties(self, result: EpisodeResult) -> None:
        data = result.to_dict()
        for key in ("spec_id", "repeat", "turns", "termination", "progress", "satisfied", "tokens", "cost_usd", "trace"):
            self.user_properties.append((PROPERTY_PREFIX + key, data[key]))
        self.user_properties.append((PROPERTY_PREFIX + "survived", result.survived))
        # The whole episode record, so the controller can merge results.json and the gate under xdist.
        self.user_properties.append((PROPERTY_PREFIX + "episode", json.dumps(data, ensure_ascii=False)))

    def runtest(self) -> None:
        from .report.text import failure_text, headline, transcript_text

        assert self.result is not None
        self.add_report_section("call", "ncp transcript", transcript_text(self.result))
        if self.result.termination.is_conflict:
            self._fail(failure_text(self.result), headline(self.result))


class CommitmentItem(_SpecItem):
    def __init__(self, *, commitment_id: str, index: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.commitment_id, self.index = commitment_id, index

    def _properties(self, result: EpisodeResult) -> None:
        self.user_properties.append((PROPERTY_PREFIX + "commitment", self.commitment_id))
        self.user_properties.append((PROPERTY_PREFIX + "state", result.commitment_states[self.commitment_id]))

    def runtest(self) -> None:
        from .report.text import commitment_text

        assert self.result is not None
        commitment = self.spec.commitment(self.commitment_id)
        state = self.result.commitment_states[self.commitment_id]
        if state == "VIOLATED" or (commitment.kind == "achievement" and state != "SATISFIED"):
            text = commitment_text(self.result, self.commitment_id)
            self._fail(text, text.splitlines()[0])

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = self.spec.line_of("commitments", self.index)
        return self.path, (line - 1 if line else None), self.name


class InvalidSpecItem(pytest.Item):
    """Stands for a spec that failed validation: an error for that file only; the rest still runs."""

    def __init__(self, *, message: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.message = message
        self.add_marker(MARKER)

    def setup(self) -> None:
        raise SpecInvalid(self.message)

    def runtest(self) -> None:  # pragma: no cover - setup always raises
        raise SpecInvalid(self.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, SpecInvalid):
            return f"invalid spec\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, "invalid spec"
