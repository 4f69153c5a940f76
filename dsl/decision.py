"""What a policy says about one call, why, and the one place where precedence is decided.

Every rule whose selector covers the tool is evaluated; each yields a `RuleOutcome`. `decide()`
then combines the ones that count: deny beats ask beats allow, and when nothing counts the
policy's default applies. A condition that errored counts as matched for deny and ask and as not
matched for allow, so an error can never lead to allow; the outcome records the error either way.
For the same reason a default allow never applies to a call for which some rule errored: that
call is denied.
"""

from __future__ import annotations

from typing import Sequence

import msgspec

from dsl.requirements import Requirements, strictest
from dsl.values import is_input_error

EFFECTS = ("allow", "deny", "ask")
PRECEDENCE = ("deny", "ask", "allow")  # strongest first


class RuleOutcome(msgspec.Struct, frozen=True, omit_defaults=True):
    """One rule's result for one call.

    - `counted`: the rule takes part in the decision (its condition held, or it errored and the
      rule is deny or ask).
    - `error`: why the condition could not be evaluated (missing field, wrong type), if it could not.
    """

    rule: str
    line: int
    effect: str
    counted: bool
    error: str | None = None
    reason: str | None = None
    condition: str | None = None


class Decision(msgspec.Struct, frozen=True, omit_defaults=True):
    """The policy's answer for one call.

    - `effect`: allow, deny or ask.
    - `reasons`: what the agent reads (deny) or the reviewer sees (ask); may be empty for allow.
    - `deciding`: ids of the rules that produced the effect (empty when the default applied).
    - `outcomes`: every rule that counted or errored, in file order.
    - `requirements`: for ask, the strictest combination of the matching ask rules.
    - `by_default`: no rule counted and the policy's default applied.
    - `policy`, `policy_digest`: the policy's name and its digest (`Policy.digest`: the SHA-256,
      hex, of its source bytes, and of the roster groups it names when it names some).
    """

    effect: str
    policy: str
    policy_digest: str
    reasons: tuple[str, ...] = ()
    deciding: tuple[str, ...] = ()
    outcomes: tuple[RuleOutcome, ...] = ()
    requirements: Requirements | None = None
    by_default: bool = False

    def explain(self) -> list[str]:
        """Human-readable lines: the effect, each rule that counted or errored and why."""
        lines = [f"effect: {self.effect}" + (" (policy default)" if self.by_default else "")]
        for reason in self.reasons:
            lines.append(f"  reason: {reason}")
        for o in self.outcomes:
            mark = "*" if o.rule in self.deciding else " "
            if o.error is None:
                why = "condition holds" if o.condition else "no condition"
            elif o.counted:
                why = f"condition could not be evaluated ({o.error}); counts as matched for {o.effect}"
            else:
                why = f"condition could not be evaluated ({o.error}); an allow never counts on an error"
            lines.append(f" {mark} line {o.line} [{o.rule}] {o.effect}: {why}")
        if self.requirements is not None:
            r = self.requirements
            lines.append(
                f"  needs approval by {r.describe()}; decisions {', '.join(r.decisions)}; "
                + (f"expires after {r.timeout_seconds}s as {r.on_timeout}" if not r.stages
                   else f"escalates after {r.timeout_seconds}s" + r.describe_escalation())
                + (f"; {r.rememberable.describe()}" if r.rememberable is not None else "")
            )
        if len({o.effect for o in self.outcomes if o.counted}) > 1:
            lines.append("  precedence: deny beats ask beats allow")
        return lines


class DefaultEffect(msgspec.Struct, frozen=True):
    """The policy's `default` statement, resolved: effect, reason, and requirements for ask."""

    effect: str = "ask"
    reason: str | None = None
    requirements: Requirements | None = None


DEFAULT_REASON = "No rule covers this call; a person decides."


def decide(
    outcomes: Sequence[RuleOutcome],
    requirements_by_rule: dict[str, Requirements],
    default: DefaultEffect,
    policy: str,
    policy_digest: str,
) -> Decision:
    """Combine rule outcomes into a Decision. This is the only place precedence is decided."""
    counted = [o for o in outcomes if o.counted]
    for effect in PRECEDENCE:
        winners = [o for o in counted if o.effect == effect]
        if winners:
            break
    else:
        errors = [o for o in outcomes if o.error is not None]
        if default.effect == "allow" and errors:
            # The rules that speak about this tool could not be evaluated; a default allow would
            # turn that error into an allow. Fail closed instead, and say why.
            return Decision(
                effect="deny",
                policy=policy,
                policy_digest=policy_digest,
                reasons=_reasons(errors)
                + ("The policy's default is allow, but a rule for this tool could not be evaluated, so the call is denied.",),
                outcomes=tuple(outcomes),
                by_default=True,
            )
        reason = default.reason or (DEFAULT_REASON if default.effect != "allow" else None)
        return Decision(
            effect=default.effect,
            policy=policy,
            policy_digest=policy_digest,
            reasons=(reason,) if reason else (),
            outcomes=tuple(outcomes),
            requirements=default.requirements if default.effect == "ask" else None,
            by_default=True,
        )
    reasons = _reasons(winners)
    deciding = tuple(o.rule for o in winners)
    requirements = None
    if effect == "ask":
        requirements = strictest(requirements_by_rule[o.rule] for o in winners)
        if not requirements.satisfiable():  # only a hand-built Requirements can get here
            effect = "deny"
            reasons += (f"No one can approve this call: it needs {requirements.describe()}.",)
            requirements = None
    return Decision(
        effect=effect,
        policy=policy,
        policy_digest=policy_digest,
        reasons=reasons,
        deciding=deciding,
        outcomes=tuple(outcomes),
        requirements=requirements,
    )


def _reasons(outcomes: Sequence[RuleOutcome]) -> tuple[str, ...]:
    """What the agent (or the reviewer) reads for these outcomes: each rule's reason, and for a
    rule whose condition errored, the error beside it. When every error among them is the call's
    own input error (a command that cannot be parsed: `dsl.values.is_input_error`), the rules that
    met it say nothing about this call, so their reasons are left out and each such error is
    given once, as a sentence; the rules are still in `deciding` and `outcomes`."""
    errored = [o for o in outcomes if o.error is not None]
    if errored and all(is_input_error(o.error) for o in errored):
        clean = tuple(o.reason for o in outcomes if o.error is None and o.reason)
        return clean + tuple(dict.fromkeys(_sentence(o.error) for o in errored))  # type: ignore[arg-type]
    return tuple(_reason(o) for o in outcomes if o.reason or o.error)


def _sentence(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


def _reason(o: RuleOutcome) -> str:
    if o.error is None:
        return o.reason or ""
    note = f"(the condition of rule {o.rule} could not be evaluated: {o.error})"
    return f"{o.reason} {note}" if o.reason else note
