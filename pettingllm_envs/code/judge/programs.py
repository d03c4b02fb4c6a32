"""The programs of the judge's sandbox runs, made once per process from the module files of
:mod:`pettingllm_envs.code.judge.sandboxed`.

A program holds those modules' code objects, compiled here (this interpreter is the
sandbox's), marshalled and compressed, and a few lines that load them in the sandbox as modules
of one package, so that their relative imports work there as here, then call the run's entry
point. Compiling the source in each run took more than a whole run, and every run's program is
copied a few times on its way to the sandbox. The modules travel whole, from their own files,
so what runs in the sandbox is what one reads here.
"""

from __future__ import annotations

import base64
import marshal
import zlib
from pathlib import Path
from types import ModuleType

from pettingllm_envs.code.judge.sandboxed import answer, candidate, channel, driver, loading, wire

#: The package the modules belong to inside a run.
PACKAGE = "judge_program"
#: Seconds a run may take beyond its tests' time limits (start-up, loading, the verdict).
RUN_SLACK_SECONDS = 2.0


def program(modules: tuple[ModuleType, ...], entry: str) -> str:
    """A run's program: ``modules`` loaded in order (each after the modules it imports), then
    ``entry``, a function of the last one, called."""
    codes = []
    for module in modules:
        path = str(module.__file__)
        source = Path(path).read_text(encoding="utf-8")
        codes.append((module.__name__.rpartition(".")[2], compile(source, path, "exec", dont_inherit=True, optimize=2)))
    packed = base64.b64encode(zlib.compress(marshal.dumps(codes), 9))
    return ("import binascii, marshal, sys, types, zlib\n"
            f"for name, code in marshal.loads(zlib.decompress(binascii.a2b_base64({packed!r}))):\n"
            f"    module = sys.modules[f'{PACKAGE}.{{name}}'] = types.ModuleType(f'{PACKAGE}.{{name}}')\n"
            f"    module.__package__ = {PACKAGE!r}\n"
            "    exec(code, module.__dict__)\n"
            f"module.{entry}()\n")


#: The program of every driver run (:func:`.sandboxed.driver.main`).
DRIVER_PROGRAM = program((loading, wire, candidate, channel, driver), "main")
#: The program of a one-process run (:func:`.sandboxed.answer.answer_calls`): only the modules
#: that mode uses, so that it loads as fast as a bare program.
ANSWER_PROGRAM = program((loading, answer), "answer_calls")
