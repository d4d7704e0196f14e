"""Runs the project's binaries for the tests in children forked from a process that has imported TensorFlow.

`python -m module args` spends seconds of a test's time importing TensorFlow and Keras before the binary's
own code runs. This server imports them once (and nothing that defines a flag), then answers each request by
forking: the child takes the request's environment, working directory, argv and standard streams and runs the
module as `__main__` (`runpy`), as the interpreter would, so the binary's flags, checks, output and exit
status are its own. What a fork cannot show, the tests still run in a fresh interpreter (`helpers.run_binary`
decides): whether a binary loads TensorFlow at all, and start-up itself.

Protocol, one JSON object a line: the test writes {"id", "module", "args", "env", "cwd", "stdin", "stdout",
"stderr"} (the last three are file paths); the server answers {"id", "pid"} once the child runs and {"id",
"status"} when it has ended (the exit status, or minus the signal that ended it). Children run side by side
(the workers of one multi-worker job), so answers about different ids may interleave. When its input ends,
the server kills the children still running and exits.
"""

import atexit
import io
import json
import os
import runpy
import select
import signal
import sys
import traceback


def preload() -> None:
    from pipelines import app

    app.import_tensorflow_quietly()
    import keras  # noqa: F401


def run_child(request: dict) -> int:
    """In the forked child: the binary's exit status, as `python -m` would return it."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in an interpreter started from a terminal
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # `python -m` puts the working directory first
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        target = os.open(request[name], mode)
        os.dup2(target, fd)
        os.close(target)
    # Buffered binary streams under text ones, as the interpreter's own (`sys.stdin.buffer` reads in blocks).
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), line_buffering=False)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), line_buffering=True)
    sys.argv = [request["module"], *request["args"]]
    status = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            print(code, file=sys.stderr)
            status = 1
    except KeyboardInterrupt:  # the interpreter prints it and ends by the signal itself
        traceback.print_exc()
        status = -signal.SIGINT
    except BaseException:  # noqa: BLE001 (the interpreter's own handling of an uncaught exception)
        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
    return status if status < 0 else status & 0xFF


def serve() -> None:
    """One thread (a fork never copies another thread's locks): it reads requests, forks, and reaps."""
    preload()
    answers = sys.stdout
    running: dict[int, object] = {}  # pid -> the request's id
    pending = b""
    reading = True

    def answer(message: dict) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    while reading or running:
        if reading and select.select([0], [], [], 0.02)[0]:
            chunk = os.read(0, 1 << 16)
            reading = bool(chunk)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                sys.stderr.flush()
                answers.flush()
                pid = os.fork()
                if pid == 0:
                    status = 1
                    try:
                        status = run_child(request)
                        if status < 0:
                            signal.signal(-status, signal.SIG_DFL)
                            os.kill(os.getpid(), -status)
                    finally:
                        os._exit(status & 0xFF)
                running[pid] = request["id"]
                answer({"id": request["id"], "pid": pid})
            if not reading:  # the tests have ended: nothing will wait for these children
                for pid in running:
                    os.kill(pid, signal.SIGKILL)
        elif not reading:
            select.select([], [], [], 0.02)
        while running:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in running:
                answer({"id": running.pop(pid), "status": os.waitstatus_to_exitcode(wait_status)})


if __name__ == "__main__":
    serve()
