"""Runs the project's binaries for the tests in children forked from a process that has imported TensorFlow.

`python -m module args` spends seconds of a test's time importing TensorFlow and Keras before the binary's
own code runs. This server imports them once (and nothing that defines a flag), then answers each request by
forking: the child takes the request's environment, working directory, argv and standard streams and runs the
module as `__main__` (`runpy`), as the interpreter would, so the binary's flags, checks, output and exit
status are its own. What a fork cannot show, the tests still run in a fresh interpreter (`helpers.run_binary`
decides): whether a binary loads TensorFlow at all, and start-up itself.

Protocol, one JSON object a line: the test writes {"module", "args", "env", "cwd", "stdin", "stdout",
"stderr"} (the last three are file paths); the server answers {"pid"} once the child runs and {"status"} when
it has ended (the exit status, or minus the signal that ended it).
"""

import atexit
import io
import json
import os
import runpy
import sys
import traceback


def preload() -> None:
    from pipelines import app

    app.import_tensorflow_quietly()
    import keras  # noqa: F401


def run_child(request: dict) -> int:
    """In the forked child: the binary's exit status, as `python -m` would return it."""
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # `python -m` puts the working directory first
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        target = os.open(request[name], mode)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
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
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 130
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
    return status & 0xFF


def serve() -> None:
    preload()
    answers = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                status = run_child(request)
            finally:
                os._exit(status)
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, wait_status = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(wait_status)
        answers.write(json.dumps({"status": status}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
