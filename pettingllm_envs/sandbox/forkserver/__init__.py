"""The fork server: the process that forks one child per sandboxed run, by concern.

* :mod:`~pettingllm_envs.sandbox.forkserver.protocol`: how the client starts the server and
  speaks to it (JSON frames), and the server <-> zygote messages;
* :mod:`~pettingllm_envs.sandbox.forkserver.server`: the server's event loop (control frames,
  starting runs, pipes, deadlines, results, shutdown) and its entry point;
* :mod:`~pettingllm_envs.sandbox.forkserver.slots`: what each slot owns (uid, working directory,
  network namespace) and the root-only layers;
* :mod:`~pettingllm_envs.sandbox.forkserver.zygote`: the warm process the runs are forked from;
* :mod:`~pettingllm_envs.sandbox.forkserver.child`: a run's own process, from the fork to its exit;
* :mod:`~pettingllm_envs.sandbox.forkserver.reaper`: killing and reaping what runs leave behind.

The client is :mod:`pettingllm_envs.sandbox.executor`. This package's ``__init__`` imports
nothing: the server process loads only the modules it runs.
"""
