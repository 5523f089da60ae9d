"""Runs the Python code blocks of a docs page, in order, in one namespace (as a reader would
type them into one session), and compares what each prints with the ```output block that
follows it on the page.

    python tests/doc_blocks.py run docs/guides/getting-started.md      # JSON: each block's output
    python tests/doc_blocks.py update docs/guides/getting-started.md   # rewrite the output blocks

A page is run in a process of its own (``tests/test_docs.py``), from the repository root, so a
page may set environment variables before it imports jaxprc (the many-devices guide does).
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```\n(?:\n*^```output\n(?P<output>.*?)^```\n)?",
                    re.M | re.S)


@dataclass
class Block:
    code: str
    expected: str | None       # None: the page shows no output for this block
    line: int
    tail: tuple[int, int]      # from the end of the code block to the end of its output block


def blocks(text: str) -> list[Block]:
    return [Block(m.group("code"), m.group("output"), text.count("\n", 0, m.start()) + 1,
                  (m.end("code") + len("```\n"), m.end()))
            for m in _BLOCK.finditer(text)]


def run(path: Path) -> list[str]:
    """Each block's printed output; an uncaught exception stops the page with its traceback."""
    namespace = {"__name__": "__main__"}
    outputs = []
    for block in blocks(path.read_text()):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(block.code, f"{path}:{block.line}", "exec"), namespace)  # noqa: S102
            except Exception:  # noqa: BLE001 -- reported as the page's failure, with where
                raise RuntimeError(f"{path}, the block at line {block.line} raised:\n"
                                   f"{traceback.format_exc()}") from None
        outputs.append(out.getvalue())
    return outputs


def normalize(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def update(path: Path) -> None:
    """Rewrite each block's output block with what the block prints now (none if it prints nothing)."""
    text = path.read_text()
    for block, output in reversed(list(zip(blocks(text), run(path)))):
        new = f"\n```output\n{normalize(output)}\n```\n" if output.strip() else ""
        text = text[:block.tail[0]] + new + text[block.tail[1]:]
    path.write_text(text)


if __name__ == "__main__":
    command, page = sys.argv[1], Path(sys.argv[2])
    if command == "run":
        results = run(page)
        sys.stdout.write("\n" + json.dumps(results))
    else:
        update(page)
