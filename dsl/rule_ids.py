"""The id of a rule that declares none (no `id "..."` clause).

It is `EFFECT-XXXXXXXX`: the rule's effect and the first 8 hex digits of the SHA-256 of its text
as `dsl.fmt.rule_text` prints it (`deny Bash when any c in shell(args.command): c.program ==
"rm"`: effect, selectors and condition on one line; UTF-8). So it names what the rule matches and
does, not where it stands: `policy fmt --write`, moving rules, adding or removing other rules,
comments, and editing the rule's reason or requirements leave it unchanged, and cases files and
the rule ids recorded in a ledger keep their meaning. Editing the rule's effect, tools or
condition gives it another id: it is another rule.

Two rules with the same text (duplicates, which `policy check` warns about) would share one id;
the second (in file order) is `...-XXXXXXXX.2`, the third `.3` (see `dsl.policy`), and a
generated id never takes one a rule declares.

Until this form, such a rule was `L<line>`; ledgers written then keep those ids and verify as
before (a ledger records ids as opaque strings).
"""

from __future__ import annotations

import hashlib

from dsl import ast
from dsl.fmt import rule_text

DIGITS = 8  # hex digits of the digest: 32 bits, against a policy's few hundred rules


def implicit_id(rule: ast.Rule, source_lines: list[str]) -> str:
    """`EFFECT-XXXXXXXX` for `rule` (see the module docstring); `source_lines`: the policy's lines."""
    digest = hashlib.sha256(rule_text(rule, source_lines).encode("utf-8")).hexdigest()
    return f"{rule.effect}-{digest[:DIGITS]}"
