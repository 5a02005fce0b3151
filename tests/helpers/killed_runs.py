"""A fork server for the kill test (``tests/reliability/test_kill.py``): run as a script, it imports
geprof_nb and builds the graph once, then forks one child per request (a line of JSON on stdin) that
profiles a 300-step ResNet-50 training run (batch 8, GE options, virtual clock) and is killed with
SIGKILL at the moment the request names, and answers with a line of JSON on stdout.

A child logs, from the writer thread, what reached the run directory: a line per chunk block written
(``A <chunk> <records in the file>``) and per chunk closed (``C <chunk> <records>``), after the write
returned, so the log never claims more than the files hold (a kill between a write and its line only
makes the log claim less).  The kill moments (``mode``):

* ``step``: from the main thread, right after step ``at`` (1..300) ran;
* ``job``: from the writer thread, before its job number ``at`` (the checkpoints, the finalise's jobs);
* ``torn``: from the writer thread in the middle of its block write number ``at``: ``cut`` bytes of the
  block reach the file (``T <chunk> <whole records in the file> <bytes of a torn record>``), then the kill;
* ``timer``: from this server, ``delay`` seconds after the child started its first step;
* ``none``: no kill (the reference run); the answer gives its jobs, writes and seconds.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

STEPS = 300


def _child(request: dict, log_fd: int, ready_fd: int) -> None:
    """Profile the run, killed where ``request`` says (never returns)."""
    import numpy as np

    from geprof_nb import ge
    from geprof_nb.ge.session import step_hooks
    from geprof_nb.prof import writer as writer_module

    mode, at = request["mode"], request.get("at", 0)
    counts = {"jobs": 0, "writes": 0}

    def say(line: str) -> None:
        os.write(log_fd, (line + "\n").encode())

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    real_append, real_close = writer_module.ChunkFile.append, writer_module.ChunkFile.close
    real_run_job = writer_module.Writer._run_job

    def append(chunk, block):
        counts["writes"] += 1
        if mode == "torn" and counts["writes"] == at:
            chunk.open()
            if chunk.names_first is not None:  # what the real append writes before the block's bytes
                chunk.names_first()
            data = np.ascontiguousarray(block).view(np.uint8).reshape(-1)
            cut = max(1, min(len(data) - 1, int(request["cut"] * len(data)))) if len(data) > 1 else 0
            os.write(chunk._fd, data[:cut].tobytes())
            size = chunk.dtype.itemsize
            say(f"T {chunk.tmp} {chunk.records + cut // size} {cut % size}")
            die()
        real_append(chunk, block)
        if chunk.error is None:
            say(f"A {chunk.tmp} {chunk.records}")

    def close(chunk):
        size = real_close(chunk)
        say(f"C {chunk.path} {chunk.records}")
        return size

    def run_job(writer, job):
        counts["jobs"] += 1
        if mode == "job" and counts["jobs"] == at:
            die()
        real_run_job(writer, job)

    writer_module.ChunkFile.append, writer_module.ChunkFile.close = append, close
    writer_module.Writer._run_job = run_job

    class KillAfterStep:
        steps = 0

        def before_step(self, info) -> None:
            if self.steps == 0:
                os.write(ready_fd, b"r")  # the first step starts: the timer's zero
                os.close(ready_fd)

        def after_step(self, info) -> None:
            self.steps += 1
            if mode == "step" and self.steps == at:
                die()

    options = {"output": request["out"], "training_trace": "on", "task_trace": "on",
               "checkpoint_interval": str(request.get("checkpoint_interval", "0.1"))}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(options),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    step_hooks.add(KillAfterStep())
    started = time.perf_counter()
    sess = ge.Session()
    assert sess.add_graph(1, GRAPH) == ge.SUCCESS
    for _ in range(STEPS):
        assert sess.run_graph(1) == ge.SUCCESS
    assert ge.GEFinalize() == ge.SUCCESS
    say(f"DONE {counts['jobs']} {counts['writes']} {time.perf_counter() - started}")
    os._exit(0)


def _serve(request: dict) -> dict:
    log_path = request["log"]
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        try:
            _child(request, log_fd, ready_w)
        except BaseException:  # noqa: BLE001 - an assertion in the child: said, and the test sees the status
            import traceback

            traceback.print_exc()
        finally:
            os._exit(3)
    os.close(log_fd)
    os.close(ready_w)
    if request["mode"] == "timer":
        readable, _, _ = select.select([ready_r], [], [], 60)
        if readable and os.read(ready_r, 1):
            time.sleep(request["delay"])
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it had finished
                pass
    _, status = os.waitpid(pid, 0)
    os.close(ready_r)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return {"killed": killed, "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}


if __name__ == "__main__":
    from geprof_nb import ge as _ge

    GRAPH = _ge.models.resnet50(batch_size=8)  # built once; each child compiles it
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_serve(json.loads(line))), flush=True)
