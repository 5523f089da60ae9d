"""The verifier page: each check the verifier makes, with a small program that fails it and the
error it gives, once as text (``jaxprc.ir.parse``, which runs the checks as it reads) and once as a
program built in Python (``jaxprc.ir.verify``, which passes run after each step).

The errors are produced at build time by running both on the bad programs below; an example that
no longer fails stops the build, so the page cannot show an error jaxprc does not give."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Check:
    title: str
    rule: str                        # what the verifier demands, one sentence
    bad_text: str                    # a text program that breaks the rule
    good_text: str                   # a correct program ...
    break_it: Callable               # ... broken in Python the same way: ClosedJaxpr -> ClosedJaxpr


def _retype_output(cj):
    from jaxprc.ir import ShapedArray
    cj.jaxpr.eqns[0].outvars[0].aval = ShapedArray((), np.float32)
    return cj


def _bind_twice(cj):
    cj.jaxpr.eqns[1].outvars = list(cj.jaxpr.eqns[0].outvars)
    return cj


def _use_before_binding(cj):
    first, second = cj.jaxpr.eqns
    cj.jaxpr.eqns = [second, first]
    return cj


def _drop_equation(cj):
    cj.jaxpr.eqns = []
    return cj


def _set_param(**params):
    def break_it(cj):
        eqn = cj.jaxpr.eqns[0]
        eqn.params = {**eqn.params, **params}
        return cj
    return break_it


def _drop_param(name):
    def break_it(cj):
        eqn = cj.jaxpr.eqns[0]
        eqn.params = {k: v for k, v in eqn.params.items() if k != name}
        return cj
    return break_it


def _swap_operand_type(cj):
    from jaxprc.ir import ShapedArray, Var
    cj.jaxpr.invars[1] = Var(ShapedArray((3,), np.int32))
    cj.jaxpr.eqns[0].invars[1] = cj.jaxpr.invars[1]
    return cj


def _bad_literal(cj):
    cj.jaxpr.eqns[0].invars[1].val = np.float64(2.0)     # the value's dtype is not its type's
    return cj


def _bad_const(cj):
    cj.consts[0] = np.zeros(4, np.float32)
    return cj


def _outer_variable_in_branch(cj):
    outer = cj.jaxpr.invars[0]
    branch = cj.jaxpr.eqns[1].params["branches"][0].jaxpr
    branch.eqns[0].invars[0] = outer
    return cj


_COND = """{ lambda ; a:f32[] b:f32[]. let
    c:i32[] = convert_element_type[new_dtype=i32 weak_type=False] True:bool[]
    d:f32[] = cond[
      branches=(
        { lambda ; e:f32[]. let f:f32[] = sin %s in (f,) },
        { lambda ; g:f32[]. let h:f32[] = cos g in (h,) }
      )
    ] c b
  in (d,) }"""

CHECKS = [
    Check("Each variable is bound once",
          "Constvars, invars and equation outputs together bind each variable exactly once.",
          "{ lambda ; a:f32[3]. let b:f32[3] = sin a; b:f32[3] = cos a in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = cos a in (c,) }", _bind_twice),
    Check("Variables are bound before they are used",
          "An operand is a variable bound earlier in the same jaxpr (or a literal).",
          "{ lambda ; a:f32[3]. let b:f32[3] = sin c; c:f32[3] = cos a in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = cos b in (c,) }", _use_before_binding),
    Check("The results are bound",
          "Each of the jaxpr's results is bound in it (or is a literal).",
          "{ lambda ; a:f32[3]. let  in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }", _drop_equation),
    Check("Sub-jaxprs see only their own variables",
          "A sub-jaxpr (a branch, a loop body, a callee) is checked in a scope of its own: it may use "
          "only its own constvars, invars and equation outputs, never a variable of the jaxpr around it.",
          _COND % "a", _COND % "e", _outer_variable_in_branch),
    Check("Declared types are the typing rule's",
          "Each equation's declared output types equal what the primitive's typing rule computes "
          "from the operand types and the params (shape, dtype and weak type).",
          "{ lambda ; a:f32[3]. let b:f32[] = sin a in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }", _retype_output),
    Check("Operands fit the typing rule",
          "The typing rule accepts the operand types (an elementwise primitive takes operands of "
          "one shape and dtype; promotion is explicit, by `convert_element_type`).",
          "{ lambda ; a:f32[3] b:i32[3]. let c:f32[3] = add a b in (c,) }",
          "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }", _swap_operand_type),
    Check("Params have the primitive's names",
          "An equation has exactly the params its primitive's schema declares (optional ones may be "
          "left out).",
          "{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0,) keepdims=True] a in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0,)] a in (b,) }",
          _set_param(keepdims=True)),
    Check("No param is missing",
          "Every param the schema requires is there.",
          "{ lambda ; a:f32[3]. let b:f32[] = reduce_sum a in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0,)] a in (b,) }", _drop_param("axes")),
    Check("Each param's value fits its schema",
          "A param holds the kind of value its schema names (ints are real integers within int64, "
          "never bools or floats; axes are non-negative; enums are their own type).",
          "{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0.5,)] a in (b,) }",
          "{ lambda ; a:f32[3]. let b:f32[] = reduce_sum[axes=(0,)] a in (b,) }", _set_param(axes=(True,))),
    Check("Literals are scalars their dtype can hold",
          "A literal has a scalar type and a value of exactly that dtype, in its range.",
          "{ lambda ; a:u8[]. let b:u8[] = add a 300:u8[] in (b,) }",
          "{ lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }", _bad_literal),
    Check("Constants have their constvars' types",
          "The values a closed jaxpr holds (`with a = ...`) have the shapes and dtypes of its "
          "constvars.",
          "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add a b in (c,) } with a = [1.0, 2.0]",
          "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add a b in (c,) } with a = [1.0, 2.0, 3.0]",
          _bad_const),
]

# Errors of the text form alone (a program that cannot be built), from the parser.
PARSE_ONLY = [
    ("A syntax error names what was expected", "{ lambda ; a:f32[3] let b:f32[3] = sin a in (b,) }"),
    ("An unknown primitive", "{ lambda ; a:f32[3]. let b:f32[3] = sine a in (b,) }"),
    ("An unknown dtype", "{ lambda ; a:f31[3]. let  in (a,) }"),
    ("A reference to an undefined definition",
     "{ lambda ; a:f32[]. let b:f32[] = jit[jaxpr=@missing name=\"f\"] a in (b,) }"),
]


def text_error(text: str) -> str:
    from jaxprc.ir import ParseError, parse
    try:
        parse(text)
    except ParseError as e:
        return str(e)
    raise RuntimeError(f"the docs' bad program parses without an error:\n{text}")


def verify_error(check: Check) -> str:
    from jaxprc.ir import JaxprTypeError, parse, verify
    program = check.break_it(parse(check.good_text))
    try:
        verify(program)
    except JaxprTypeError as e:
        return f"{type(e).__name__}: {e}"
    raise RuntimeError(f"the docs' broken program verifies: {check.title}")


def verifier_markdown() -> str:
    out = []
    for check in CHECKS:
        out += [f"## {check.title}", "", check.rule, "", "In text, `jaxprc.ir.parse` reports:", "",
                "```text", check.bad_text, "```", "", "```text", text_error(check.bad_text), "```", ""]
        out += ["The same fault in a program built in Python (the correct program below, changed "
                "in place), as `jaxprc.ir.verify` reports it:", "", "```text", check.good_text, "```", "",
                "```text", verify_error(check), "```", ""]
    out += ["## Errors of the text form", "",
            "These come from the parser alone: such a program cannot be built in Python.", ""]
    for title, text in PARSE_ONLY:
        out += [f"**{title}.**", "", "```text", text_error(text), "```", ""]
    return "\n".join(out)
