"""The parts of code_v0's judge that run inside the sandbox: the programs of its runs.

Every module here imports only the standard library and its siblings (relative imports): the
sandbox shows none of the project's files, so :mod:`pettingllm_envs.code.judge.programs` ships
these modules' own files, compiled and marshalled, as a run's program, and loads them there as
modules of one package. Nothing here is secret: a run's program is visible to the code under test.

* :mod:`.loading`: what both programs start with (a stdin frame, the code under test loaded)
  and the helpers of their failure messages;
* :mod:`.answer`: the one-process run, the code answering calls the host already knows;
* :mod:`.wire`: the data-only codec of the candidate socket, its messages, and ``perturb``;
* :mod:`.candidate`: the process that runs the code under test in a driver run;
* :mod:`.channel`: the driver's end of that process (a call from a test, its reply decoded);
* :mod:`.driver`: the driver run itself (its protocol is described there).
"""
