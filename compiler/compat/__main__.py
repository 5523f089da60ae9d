"""``python -m jaxprc.compat script.py [args]`` (or ``-m module [args]``): run a JAX program on jaxprc."""
import os
import runpy
import sys

from . import install

USAGE = "usage: python -m jaxprc.compat script.py [args...] | -m module [args...]"


def main(argv):
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return 2
    install()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


sys.exit(main(sys.argv[1:]))
