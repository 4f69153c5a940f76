"""Arithmetic of the policy language: exact decimals, so that money adds up (`0.1 + 0.2 == 0.3`).

Numbers arrive as Python ints and floats (decoded JSON, the policy's literals). Arithmetic reads
each as a `decimal.Decimal`: an int exactly, a float as the shortest decimal that reads back as
that float (`repr`, which is what the JSON text or the literal said for any number of up to 15
significant digits: `1000.10` is 1000.1, `0.1` is 0.1, not 0.1000000000000000055...). Results are
Decimals, which `dsl.values` counts as numbers.

Sums, differences, products and negations are exact: a result that would need more than
`EXACT_DIGITS` significant digits is an evaluation error, never rounded (`1e34 + 0.3` is
10000000000000000000000000000000000.3, so `args.amount + args.fee <= args.limit` cannot round a
fee away). A quotient is rounded to `PRECISION` (34) significant digits, half to even, as IEEE 754
decimal128 does (1 / 3 has no exact decimal); what is computed from a quotient is exact again
(`args.total / 3 * 1.5`). Beyond that:

* a result whose exponent is outside +-6144 is an evaluation error (nothing silently becomes an
  infinity or zero);
* dividing by zero is an evaluation error;
* a boolean, a string, null, NaN or an infinity is not a number here: an evaluation error.

(Rounding every result to 34 digits was tried first: then `1e34 + 0.3 <= 1e34` held, an allow
that a limit should have stopped; tests/test_attacks14.py.)

Comparisons (`dsl.values`): a Decimal against an int compares exactly; against a float, the float
is read as above, so `0.1 + 0.2 == 0.3` holds and `args.amount * 2 > 1000.10` compares with
1000.1. Two ints or two floats compare as they always have (Python's comparison, which is exact).
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Any

from dsl.values import EvalError, _a, as_decimal, kind

PRECISION = 34  # significant digits of a quotient
EXACT_DIGITS = 25_000  # significant digits a sum, difference or product may need
_EXPONENT = 6144

_CONTEXT = decimal.Context(  # for quotients: rounded
    prec=PRECISION, rounding=decimal.ROUND_HALF_EVEN, Emax=_EXPONENT, Emin=-_EXPONENT + 1,
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow, decimal.Underflow],
)
# For + - * and negation: exact or an error. Every operand has an exponent within +-6144 and so
# at most about 12,300 digits from its first to its last; a sum of two needs no more, a product
# of two 12,300-digit numbers would (the Inexact trap turns that into an error). The work is in
# proportion to the digits the operands actually have, not to this precision.
_EXACT = decimal.Context(
    prec=EXACT_DIGITS, rounding=decimal.ROUND_HALF_EVEN, Emax=_EXPONENT, Emin=-_EXPONENT + 1,
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow, decimal.Underflow, decimal.Inexact],
)


exact = as_decimal  # an int exactly, a float by its repr, a Decimal as it is (dsl.values)


def operand(value: Any, op: str) -> Decimal:
    """`value` as an operand of `op`: a finite number, or EvalError."""
    t = type(value)
    if t is Decimal:
        return value
    if t is bool or kind(value) != "number":
        raise EvalError(f"'{op}' works on numbers, not {_a(kind(value))}")
    if (t is float or isinstance(value, float)) and not math.isfinite(value):
        raise EvalError(f"'{op}' works on finite numbers, not {value!r}")
    return exact(value)


def arithmetic(op: str, a: Any, b: Any) -> Decimal:
    """`a OP b` for OP in `+ - * /` on two numbers. Raises EvalError (see the module docstring)."""
    x, y = operand(a, op), operand(b, op)
    try:
        if op == "+":
            return _EXACT.add(x, y)
        if op == "-":
            return _EXACT.subtract(x, y)
        if op == "*":
            return _EXACT.multiply(x, y)
        if y == 0:
            raise EvalError("division by zero")
        return _CONTEXT.divide(x, y)
    except (decimal.Overflow, decimal.Underflow):
        raise EvalError(f"the result of '{op}' is out of range (exponent beyond +-{_EXPONENT})") from None
    except decimal.Inexact:
        raise EvalError(f"the result of '{op}' needs more than {EXACT_DIGITS:,} significant digits") from None
    except decimal.DecimalException as exc:  # InvalidOperation: not expected of finite operands
        raise EvalError(f"'{op}' could not be computed ({type(exc).__name__})") from None


def negate(value: Any) -> Decimal:
    """`-value` for a number. Raises EvalError."""
    x = operand(value, "-")
    try:
        return _EXACT.minus(x)
    except decimal.DecimalException:
        raise EvalError(f"'-' of this number is out of range (exponent beyond +-{_EXPONENT})") from None


def total(items: Any, name: str = "sum") -> Decimal:
    """`sum(list)`: the exact total of a list of numbers (0 for an empty list). Raises EvalError for what is not a list of numbers, or a total out of range."""
    if kind(items) != "list":
        raise EvalError(f"{name}() takes a list, not {_a(kind(items))}")
    result = Decimal(0)
    for i, item in enumerate(items):
        if type(item) is bool or kind(item) != "number":
            raise EvalError(f"{name}() adds numbers, but item {i} is {_a(kind(item))}")
        result = arithmetic("+", result, item)
    return result


def to_json(value: Decimal) -> int | float | str:
    """A Decimal for JSON output (explanations): an int when it is whole and of at most
    PRECISION digits, else the float that reads back as the same decimal, else its text (an int
    of 1e4000 would have more digits than Python's int-to-text conversion allows: json.dumps
    raises)."""
    if value == value.to_integral_value() and value.adjusted() < PRECISION:
        return int(value)
    as_float = float(value)
    if math.isfinite(as_float) and Decimal(repr(as_float)) == value:
        return as_float
    return str(value)
