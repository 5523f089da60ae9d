"""Long programs run as a sequence of executables (segments).

XLA:CPU fuses a long chain of elementwise operations into one fusion, and its
fusion emitters recurse once per fused operation on compile threads with
small fixed stacks: a chain of ~15,000 operations kills the process with
SIGSEGV (JAX dies the same way), and no stack-size setting reaches those
threads. So ``jit`` compiles a program with more top-level equations than
``jaxprc_max_segment_eqns`` (default 5,000; env ``JAXPRC_MAX_SEGMENT_EQNS``;
0 or None: never split) as consecutive segments of at most that many
equations. Each segment is a program of its own: its inputs are the values it
reads that earlier segments (or the caller) made, its outputs the values it
makes that later segments or the caller read. Segments run in order, their
results stay on the device, and a value is dropped after its last reader.

What stays the same as the unsplit program:
- results: each equation computes the same thing (XLA cannot fuse across a
  segment boundary, which changes speed, not values: XLA:CPU does not
  reassociate floating point);
- donation: a donated argument is deleted after the call exactly when the
  unsplit program could reuse it (an output of its shape and dtype), with the
  same warning otherwise; the segments themselves alias nothing;
- effects: segments run one after another and each waits for its host
  callbacks, so ordered callbacks run in program order (the runtime token
  threads through the segments as through consecutive calls), and unordered
  ones in the order XLA picks within a segment.
A segment returning many values compiles without XLA's fusion pass
(``MAX_FUSED_OUTPUTS``).
Calls of nested ``jit`` functions (``jit(grad(f))`` of a jitted ``f``) count
with their callees' equations: a program too long with them is inlined first
(passes/inline.py), then split. A long program inside a loop body, ``cond``
branch or custom rule is not split (one equation of the program that holds
it). Sharded programs (several devices) are not split either: they go through
``spmd.ShardedCall``.
"""
from __future__ import annotations

import numbers

from jaxlib import xla_client as xc

from .. import runtime
from ..ir.core import ClosedJaxpr, Jaxpr, Literal, Var
from ..ir.dtypes import config as _config
from .lowering import match_donations
from ..passes.inline import call_primitives, inline

__all__ = ["max_segment_eqns", "needs_split", "plan", "SegmentedExecutable"]

def max_segment_eqns() -> int | None:
    """The option's value, checked: a positive int, or None when programs are never split."""
    n = _config.jaxprc_max_segment_eqns
    if isinstance(n, str) and n.strip().isdigit():      # from the environment
        n = int(n)
    if n is None or n == 0:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"jaxprc_max_segment_eqns must be a positive int (or 0 or None: never split "
                         f"programs), got {n!r}")
    return int(n)


def flat_length(jaxpr: Jaxpr, sizes=None) -> int:
    """The number of equations ``jaxpr`` has once its calls (nested ``jit``) are inlined."""
    sizes = {} if sizes is None else sizes
    n = 0
    for e in jaxpr.eqns:
        callee = e.params.get("jaxpr") if e.primitive in call_primitives else None
        if callee is None or callee.consts:      # the inline pass keeps calls with consts
            n += 1
        else:
            if id(callee) not in sizes:          # a callee shared by many calls is counted once
                sizes[id(callee)] = flat_length(callee.jaxpr, sizes)
            n += sizes[id(callee)]
    return n


def needs_split(cj: ClosedJaxpr, max_eqns: int) -> ClosedJaxpr | None:
    """``cj`` as the segments are cut from (its calls inlined), or None when it is short enough
    for one executable."""
    if flat_length(cj.jaxpr) <= max_eqns:
        return None
    return inline(cj) if any(e.primitive in call_primitives for e in cj.jaxpr.eqns) else cj


class Segment:
    """One executable's part of the program: ``jaxpr`` reads the slots ``in_slots`` and writes
    ``out_slots``; ``free_slots`` hold values no later segment or result reads."""

    def __init__(self, jaxpr: ClosedJaxpr, in_slots, out_slots, free_slots):
        self.jaxpr, self.in_slots, self.out_slots, self.free_slots = jaxpr, in_slots, out_slots, free_slots


def plan(cj: ClosedJaxpr, max_eqns: int) -> tuple[list[Segment], list[int]]:
    """Split ``cj``'s top-level equations into segments of at most ``max_eqns`` equations.

    Values live in numbered slots: the program's invars first (slots 0..n-1), then every
    value a segment hands on. Returns the segments and the slots of the program's results.
    Results that are no value a segment made once (an input, a constant, a literal, a value
    returned twice) are returned by the last segment, which copies them as the unsplit
    program would.
    """
    j = cj.jaxpr
    eqns = j.eqns
    chunks = [eqns[i:i + max_eqns] for i in range(0, len(eqns), max_eqns)]
    last = len(chunks) - 1
    const_of = dict(zip(j.constvars, cj.consts))
    made_in = {v: k for k, chunk in enumerate(chunks) for e in chunk for v in e.outvars}
    # The program's results each segment's outputs give directly; the others go through the last.
    direct, is_direct = set(), []
    for v in j.outvars:
        is_direct.append(isinstance(v, Var) and v in made_in and v not in direct)
        if is_direct[-1]:
            direct.add(v)
    through = [v for v, d in zip(j.outvars, is_direct) if not d]
    # Which segment reads each value last (len(chunks): the caller, as a result).
    last_read: dict[Var, int] = {}
    for k, chunk in enumerate(chunks):
        for e in chunk:
            for v in e.invars:
                if isinstance(v, Var):
                    last_read[v] = k
    for v in through:
        if isinstance(v, Var):
            last_read[v] = last
    for v in direct:
        last_read[v] = len(chunks)
    slot = {v: i for i, v in enumerate(j.invars)}
    segments = []
    for k, chunk in enumerate(chunks):
        reads, made = [], set()
        for e in chunk:
            reads += [v for v in e.invars if isinstance(v, Var) and v not in made]
            made.update(e.outvars)
        if k == last:
            reads += [v for v in through if isinstance(v, Var) and v not in made]
        reads = list(dict.fromkeys(reads))
        consts = [v for v in reads if v in const_of]
        ins = [v for v in reads if v not in const_of]
        outs = [v for e in chunk for v in e.outvars if last_read.get(v, -1) > k]
        results = outs + (through if k == last else [])
        seg = ClosedJaxpr(Jaxpr(consts, ins, results, chunk), [const_of[v] for v in consts])
        in_slots = [slot[v] for v in ins]
        for v in outs:
            slot[v] = len(slot)
        through_slots = list(range(len(slot), len(slot) + len(through))) if k == last else []
        free = [slot[v] for v in ins if last_read[v] == k]
        segments.append(Segment(seg, in_slots, [slot[v] for v in outs] + through_slots, free))
    out_slots, rest = [], iter(through_slots)
    for v, d in zip(j.outvars, is_direct):
        out_slots.append(slot[v] if d else next(rest))
    return segments, out_slots


# XLA's fusion recomputes a chain once per output it feeds: compiling a segment that returns
# k values of one chain takes time ~k^2 (800 outputs: 84 s). The forward segments of a
# gradient return many residuals, so segments with more outputs than this compile unfused.
MAX_FUSED_OUTPUTS = 64


def _options(segment: Segment):
    if len(segment.out_slots) <= MAX_FUSED_OUTPUTS:
        return None
    options = xc.CompileOptions()
    options.executable_build_options.debug_options.xla_disable_hlo_passes = "fusion"
    return options


class SegmentedExecutable:
    """The executables of a split program, called like ``runtime.Executable``.

    It always runs through ``execute_effectful`` (``effectful`` is True), the Python path of a
    jit call, which returns the handled results of the last segments.
    """

    effectful = True
    wrap_results = runtime.Executable.wrap_results

    def __init__(self, cj: ClosedJaxpr, name: str, donated_invars, max_eqns: int, compile_segment):
        self.name = name
        self.segments, self.out_slots = plan(cj, max_eqns)
        n = len(self.segments)
        self.executables = [compile_segment(s.jaxpr, f"{name}_segment{k + 1}_of_{n}", options=_options(s))
                            for k, s in enumerate(self.segments)]
        self.out_avals = [runtime.Aval.get(a.shape, a.dtype, a.weak_type) for a in cj.out_avals]
        self.dataless_outputs = [i for i, a in enumerate(self.out_avals) if runtime.carries_no_data(a.dtype)]
        self.n_slots = 1 + max([max(s.out_slots, default=0) for s in self.segments] + [len(cj.jaxpr.invars)])
        # The donated arguments the unsplit program would reuse (and delete) after a run.
        matches = match_donations(cj.in_avals, cj.out_avals, donated_invars) if any(donated_invars) else ()
        self.deleted_args = [i for i, m in enumerate(matches) if m is not None]

    def execute_effectful(self, buffers: list) -> list:
        env = list(buffers) + [None] * (self.n_slots - len(buffers))
        for seg, exe in zip(self.segments, self.executables):
            args = [env[i] for i in seg.in_slots]
            if exe.effectful:
                outs = exe.execute_effectful(args)
            else:
                try:
                    outs = exe.loaded.execute_sharded(args).consume_with_handlers(exe.result_handlers)
                except runtime.JaxRuntimeError as e:
                    raise exe.runtime_error(e, args) from None
            for i, out in zip(seg.out_slots, outs):
                env[i] = out
            for i in seg.free_slots:
                env[i] = None
        for i in self.deleted_args:
            buffers[i].delete()
        return [env[i] for i in self.out_slots]

    def execute(self, buffers: list) -> list:
        return self.wrap_results(self.execute_effectful(buffers))

    def __call__(self, *args) -> list:
        return self.execute([a._buf if type(a) is runtime.Array else runtime.device_put(a)._buf for a in args])

    def as_text(self) -> str:
        """XLA's optimized HLO of every segment, in the order they run."""
        return "\n".join(exe.as_text() for exe in self.executables)

    def memory_analysis(self) -> list:
        """Each segment's compiled memory statistics, in the order they run."""
        return [exe.memory_analysis() for exe in self.executables]

    def cost_analysis(self) -> dict:
        """The segments' cost estimates added up (flops, bytes accessed, ...)."""
        total: dict = {}
        for exe in self.executables:
            for key, value in exe.cost_analysis().items():
                total[key] = total.get(key, 0) + value
        return total

    def __repr__(self):
        return f"SegmentedExecutable({self.name!r}, segments={len(self.executables)}, outputs={self.out_avals})"
