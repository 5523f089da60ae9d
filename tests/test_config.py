"""jaxprc.config: one table of options; ``with`` overrides are the calling thread's, as in JAX."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import jaxprc
import jaxprc.numpy as jnp
from jaxprc.ir.config import OPTIONS
from jaxprc.ir.dtypes import config


def _in_other_thread_while(context, fn):
    """Run ``fn`` in a second thread while this thread is inside ``context``; return both
    results: (this thread's, the other's)."""
    inside, done, out = threading.Event(), threading.Event(), {}

    def holder():
        with context:
            inside.set()
            done.wait(30)
            out["here"] = fn()

    def other():
        inside.wait(30)
        try:
            out["there"] = fn()
        finally:
            done.set()

    threads = [threading.Thread(target=holder), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out["here"], out["there"]


_add_one = jaxprc.jit(lambda x: x + 1)


@pytest.mark.parametrize("run", [lambda: jnp.asarray(1.5).dtype, lambda: _add_one(1.5).dtype],
                         ids=["eager", "jit"])
def test_enable_x64_is_thread_local(run):
    here, there = _in_other_thread_while(jaxprc.enable_x64(), run)
    assert (here, there) == (np.float64, np.float32)
    assert run() == np.float32 and not config.jax_enable_x64


def test_debug_nans_is_thread_local():
    def log_of_minus_one():
        try:
            return bool(np.isnan(np.asarray(_log(-1.0))))
        except FloatingPointError:
            return "raised"
    here, there = _in_other_thread_while(jaxprc.debug_nans(), log_of_minus_one)
    assert (here, there) == ("raised", True)


_log = jaxprc.jit(jnp.log)


def test_update_is_process_wide_and_override_wins():
    seen = []
    with jaxprc.numpy_rank_promotion("raise"):
        config.update("jax_numpy_rank_promotion", "warn")
        try:
            seen.append(config.jax_numpy_rank_promotion)
            t = threading.Thread(target=lambda: seen.append(config.jax_numpy_rank_promotion))
            t.start()
            t.join()
        finally:
            config.update("jax_numpy_rank_promotion", "allow")
    assert seen == ["raise", "warn"]
    assert config.jax_numpy_rank_promotion == "allow"


def test_transfer_guard_override_reaches_jaxlib_in_its_thread_only():
    def transfer():
        try:
            _add_one(np.float32(1.0))
            return "ok"
        except Exception as e:      # jaxlib's JaxRuntimeError "Disallowed host-to-device transfer"
            return "disallowed" if "Disallowed" in str(e) else repr(e)
    here, there = _in_other_thread_while(jaxprc.transfer_guard("disallow"), transfer)
    assert (here, there) == ("disallowed", "ok")


def test_unknown_and_invalid_options_raise():
    with pytest.raises(AttributeError, match="Unrecognized config option"):
        config.update("jax_no_such_option", 1)
    with pytest.raises(ValueError, match="numpy_rank_promotion"):
        config.update("jax_numpy_rank_promotion", "sometimes")
    with pytest.raises(ValueError, match="new enum value"):
        with jaxprc.transfer_guard("never"):
            pass
    assert config.jax_numpy_rank_promotion == "allow"


def test_every_option_is_declared_with_a_doc_and_reads_its_environment_variable():
    for name, option in OPTIONS.items():
        assert option.doc and name.startswith(("jax_", "jaxprc_")), name
        assert option.env is None or option.env == name.upper(), name
    code = ("from jaxprc.ir.dtypes import config; "
            "print(config.jax_enable_x64, config.jaxprc_max_segment_eqns, config.jax_numpy_rank_promotion)")
    env = dict(os.environ, JAX_ENABLE_X64="1", JAXPRC_MAX_SEGMENT_EQNS="7", JAX_NUMPY_RANK_PROMOTION="warn")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "7", "warn"]


def test_cli_help_lists_the_environment_variables_of_the_table():
    from jaxprc.tools.cli import build_parser
    epilog = build_parser().epilog
    assert all(f"{o.env}=" in epilog for o in OPTIONS.values() if o.env)


def test_options_tracing_reads_are_part_of_every_jit_cache_key(caplog):
    # A program traced under one rank-promotion or precision setting is not reused under another:
    # neither by the Python cache nor by the C++ one (the eager jnp.add runs through both).
    a, b = jnp.ones((2, 3)), jnp.ones(3)
    traces = []

    @jaxprc.jit
    def f(x, y):
        traces.append(1)
        return x + y

    for _ in range(3):          # warm: the C++ path holds the executable from the second call on
        f(a, b), a + b
    for settings in [("jax_numpy_rank_promotion", "raise"), ("jax_numpy_dtype_promotion", "strict")]:
        with config.override(*settings):
            if settings[1] == "raise":
                for call in (lambda: f(a, b), lambda: a + b):
                    with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
                        call()
            else:
                f(a, b)
    assert len(traces) == 3     # the default context, the raising trace, strict dtype promotion
    with jaxprc.default_matmul_precision("highest"), config.override("jax_explain_cache_misses", True):
        f(a, b)
    assert len(traces) == 4
    assert "jax_default_matmul_precision differs: now highest and before None" in caplog.text
    f(a, b)
    assert len(traces) == 4     # back in the default context: the first trace's entry
