"""What every binary shares: a quiet start, one clear sentence and a non-zero exit on bad input, a quick exit.

A flag absl cannot parse (an unknown name, a value not among an enum's, a
missing required flag) is one such sentence too, instead of absl's
`FATAL Flags parsing error` and its second line.

    from pipelines import app
    app.run(main)   # instead of absl.app.run(main)

TensorFlow prints start-up lines on a CPU machine that tell a user nothing
(oneDNN notices, "Could not find cuda drivers", and an `E0000 ... failed call
to cuInit` that reads as a failure). Unless the user sets
TF_CPP_MIN_LOG_LEVEL, `run` hides them: the level is set before TensorFlow
loads, and the lines its C++ libraries print while loading (before their log
settings apply) are filtered out of standard error, everything else passed on.
At exit, `run` collects once and freezes what is left (`collect_then_freeze`),
which shortens the exit of every command that loaded TensorFlow.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import gc
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable

from absl import app, flags
from absl import logging as absl_logging

from pipelines import interrupts
from pipelines.errors import UserError

USER_ERRORS = (UserError, FileNotFoundError)


def error_sentence(error: BaseException) -> str:
    """A user error's sentence; a missing file's names the user's path, not the temporary one it was being
    written under (`pipelines.files.atomic_output`)."""
    if isinstance(error, OSError) and error.filename:
        name = os.path.basename(str(error.filename))
        final = re.sub(r"^\.tmp-\d+-", "", name)
        path = os.path.join(os.path.dirname(str(error.filename)), final)
        return f"{path}: {error.strerror or error}."
    return str(error)


# The lines TensorFlow's libraries print while loading: absl's pre-init notice and INFO/WARNING records.
_START_UP_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\)|[IW]\d{4} )")


flags.disclaim_key_flags()  # the flags `define_path` defines belong to its caller (its --help lists them)


class _PathParser(flags.ArgumentParser):
    """A file or directory name, a leading ~ expanded."""

    def parse(self, argument):
        return os.path.expanduser(argument) if isinstance(argument, str) else argument

    def flag_type(self) -> str:
        return "path"


def define_path(name: str, default: str | None, help: str, **kwargs) -> flags.FlagHolder:
    """A string flag naming a file or directory, a leading `~` expanded as a shell would.

    A shell expands `--model_dir ~/runs` but leaves `--model_dir=~/runs` alone, and a run given that would
    write into a directory literally named "~" under the current one.
    """
    return flags.DEFINE(_PathParser(), name, default, help, serializer=flags.ArgumentSerializer(), **kwargs)


def positive_ints(flag: flags.FlagHolder, vocab_size: int | None = None, required: bool = False) -> list[int]:
    """A list flag's values (`--shortlists=2000,4000`) sorted without repeats: positive integers, each
    smaller than |V| = `vocab_size` when that is given. An empty list stays empty unless `required`."""
    not_positive = UserError(
        f"--{flag.name}={','.join(flag.value)} must be a comma-separated list of positive integers."
    )
    try:
        values = sorted({int(v) for v in flag.value})
    except ValueError:
        raise not_positive from None
    if values and values[0] < 1:
        raise not_positive
    if required and not values:
        raise UserError(f"--{flag.name} needs at least one value.")
    if vocab_size is not None and values and values[-1] >= vocab_size:
        raise UserError(f"--{flag.name} has {values[-1]:,}, which is not smaller than |V| = {vocab_size:,}.")
    return values


BROKEN_PIPE_EXIT = 128 + 13  # what a shell reports for a process ended by SIGPIPE, as coreutils' are


@contextlib.contextmanager
def quiet_broken_pipe():
    """Standard output's reader went away (`... | head -1`): stop quietly, as coreutils and KenLM's tools do,
    with SIGPIPE's exit status and no traceback (nor Python's own complaint when it flushes at exit)."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit's flush of what is buffered goes nowhere
        os.close(devnull)
        sys.exit(BROKEN_PIPE_EXIT)


def fail(message: str, code: int = 1) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def flag_error_sentence(message: str) -> str:
    """absl's flag-parsing error as one sentence: "--tail=foo is not one of class, backoff, network." """
    message = " ".join(message.split())
    if m := re.fullmatch(r"flag --(\w+)=None: Flag --\1 must have a value other than None\.?", message):
        return f"--{m[1]} is required."
    if m := re.fullmatch(r"flag (--\w+=.*?): value should be one of <(.*)>", message):
        return f"{m[1]} is not one of {', '.join(m[2].split('|'))}."
    if m := re.fullmatch(r"Unknown command line flag '(\w+)'(?:\. Did you mean: (.*?) \?)?", message):
        known = ", ".join(f"--{name}" for name in (m[2] or "").split(", ") if name)
        return f"unknown flag --{m[1]}" + (f"; did you mean {known}?" if known else "; --helpfull lists them all.")
    if m := re.fullmatch(r"Missing value for flag (--\w+)", message):
        return f"{m[1]} needs a value."
    if m := re.fullmatch(r"flag (--\w+=.*?): (invalid literal for int|could not convert string to float).*", message):
        return f"{m[1]} is not {'an integer' if m[2].startswith('invalid') else 'a number'}."
    if m := re.fullmatch(r"flag (--\w+=.*?): \('Non-boolean argument to boolean flag', .*\)", message):
        return f"{m[1]} is not a boolean (true or false)."
    if m := re.fullmatch(r"flag (--\w+=.*?): (.*?)\.?", message):
        return f"{m[1]}: {m[2]}."
    return message.rstrip(".") + "."


HELP_FLAGS = {"help": False, "helpshort": False, "?": False, "h": False, "helpfull": True}
PROJECT_PACKAGES = ("nplm_tf", "pipelines", "tuning", "benchmarks")
_main_module = {"name": "__main__"}  # the module whose `main` app.run runs: its docstring is the help's text


def _flags_key(module_name: str) -> str:
    """The name absl files a module's flags under: a script run as __main__ is filed under sys.argv[0]."""
    return sys.argv[0] if module_name == "__main__" else module_name


def help_text(full: bool) -> str:
    """The binary's help: its module's docstring, then its flags; the project's other flags it defines
    (corpus, precision, ...) after them; with `full`, absl's own last."""
    module = sys.modules.get(_main_module["name"]) or sys.modules["__main__"]
    doc = (module.__doc__ or "").strip("\n")
    main_key = _flags_key(_main_module["name"])
    by_module = flags.FLAGS.flags_by_module_dict()
    ours = lambda name: name == main_key or name.split(".")[0] in PROJECT_PACKAGES or name.endswith(".py")  # noqa: E731
    order = [main_key] if main_key in by_module else []
    order += sorted(name for name in by_module if name != main_key and ours(name))
    if full:
        order += sorted(name for name in by_module if not ours(name))
    sections = [flags.FLAGS.module_help(name).strip("\n") for name in order]
    text = f"{doc}\n\nflags:\n\n" + "\n\n".join(s for s in sections if s)
    if not full:
        text += "\n\n--helpfull also lists absl's own flags (logging, verbosity, ...)."
    return text + "\n"


def _help_requested(argv: list[str]) -> bool | None:
    """None, or whether the full help was asked for (`--help`, `-?`, `-h`, `--helpshort`: short; `--helpfull`)."""
    for arg in argv[1:]:
        if arg == "--":
            return None
        name = arg.lstrip("-").split("=", 1)[0]
        if arg.startswith("-") and name in HELP_FLAGS:
            return HELP_FLAGS[name]
    return None


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's parser, its errors given as one sentence (usage errors exit 2). `--help` and `--helpfull` print
    the binary's help on standard output and exit 0, whether run as `python -m` or as an installed command."""
    full = _help_requested(argv)
    if full is not None:
        with quiet_broken_pipe():
            sys.stdout.write(help_text(full))
            sys.stdout.flush()
        sys.exit(0)
    try:
        return flags.FLAGS(argv)
    except (flags.Error, ValueError) as e:  # ValueError: "--nodirect=3 does not take an argument"
        fail(flag_error_sentence(str(e)), 2)


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow with its start-up chatter hidden, unless the user set TF_CPP_MIN_LOG_LEVEL."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # also the CUDA probe's error on a machine without a GPU
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
            import tensorflow_text  # noqa: F401  (loads more C++ libraries, which print the same lines)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not _START_UP_NOISE.match(line)
            ]
            sys.stderr.write("".join(kept))


def _silence_known_warnings() -> None:
    # The project's datasets shuffle themselves (a function of seed and epoch); Keras's reminder does not apply.
    warnings.filterwarnings("ignore", message=r".*expected to already be shuffled")


def exhausted_resource_sentence(error: BaseException) -> str | None:
    """The one sentence for an exhausted resource (TensorFlow's ResourceExhaustedError, MemoryError, ENOSPC),
    else None. TensorFlow reports a full disk (ENOSPC) with the same error as a failed allocation, so the
    sentence says which. TensorFlow is not imported here: an error of its kind exists only once it is loaded."""
    if isinstance(error, MemoryError):
        detail = "Python could not allocate what it needed"
    elif isinstance(error, OSError) and error.errno == errno.ENOSPC:  # Python's own writes
        where = f"{error.filename}: " if error.filename else ""
        return f"out of disk space ({where}{error.strerror}); free some space and run the same command again."
    else:
        tf_errors = getattr(sys.modules.get("tensorflow"), "errors", None)
        if tf_errors is None or not isinstance(error, tf_errors.ResourceExhaustedError):
            return None
        text = str(error)
        first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
        first = re.sub(r"^\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]\s*$", "", first)  # the op's wrapping, if any
        if "No space left on device" in text:
            return f"out of disk space ({first.rstrip('.')}); free some space and run the same command again."
        shape = re.search(r"OOM when allocating tensor with shape\[([^\]]*)\]", text)
        if shape:
            detail = f"a tensor of shape [{shape[1]}] could not be allocated"
        elif "OOM" in text or "memory" in text.lower():
            detail = first
        else:
            return f"TensorFlow ran out of a resource: {first.rstrip('.')}."
    return (
        f"out of memory: {detail}; use smaller settings (batch, layer sizes, vocabulary) or a machine with more memory."
    )


INTERRUPTED = "interrupted."
INTERRUPTED_RESUMABLE = "interrupted; run the same command again to resume from the last finished epoch."


def guarded(
    main: Callable[[list[str]], None],
    check: Callable[[], object] | None = None,
    tensorflow: bool = True,
    resumable: bool = False,
) -> Callable[[list[str]], None]:
    """Wraps `main`: user errors print one sentence, and so does Ctrl-C (exit 130; with `resumable`, for a
    binary that trains and resumes, it says how to resume). `check` runs first, before TensorFlow loads
    (seconds on a small machine), so that the flag values it rejects are answered at once; `main(argv,
    checked)` then receives what it returned, so nothing is read twice. `tensorflow=False`: a binary that
    never needs TensorFlow does not load it (seconds and most of a gigabyte), or loads it later itself
    (`import_tensorflow_quietly`), once it has checked what it can without it."""

    def wrapped(argv: list[str]) -> None:
        if not flags.FLAGS["verbosity"].present:  # TensorFlow's INFO chatter (savers, collectives) off
            absl_logging.set_verbosity(absl_logging.WARNING)
        if len(argv) > 1:
            fail(f"unexpected arguments {argv[1:]}; every option is a --flag.", 2)
        interrupts.install()  # a Ctrl-C that Python drops (raised inside a __del__) is raised again
        try:
            with quiet_broken_pipe():
                _call(argv)
        except USER_ERRORS as e:
            fail(error_sentence(e))
        except Exception as e:  # memory or disk run out: one sentence; any other error propagates
            sentence = exhausted_resource_sentence(e)
            if sentence is None:
                raise
            fail(sentence)
        except KeyboardInterrupt:
            fail(INTERRUPTED_RESUMABLE if resumable else INTERRUPTED, 130)

    def _call(argv: list[str]) -> None:
        args = (argv,) if check is None else (argv, check())
        if tensorflow:
            import_tensorflow_quietly()
        main(*args)

    return wrapped


def collect_then_freeze() -> None:
    """At exit: collects what is garbage now, so its finalizers run (a file still open in a reference cycle is
    flushed and closed), then freezes what is left out of the collector's sight. Python's shutdown otherwise
    walks the objects TensorFlow and Keras hold in collection after collection while it clears the modules,
    and what is frozen is freed all the same when the process ends."""
    gc.collect()
    gc.freeze()


def run(
    main: Callable[[list[str]], None],
    check: Callable[[], object] | None = None,
    tensorflow: bool = True,
    resumable: bool = False,
) -> None:
    """absl's `app.run(main)`, guarded; `check` (no TensorFlow in it) validates the flags before TensorFlow loads
    (`tensorflow=False`: a binary that does not use it, or loads it itself; `resumable`: one that resumes when
    run again)."""
    _main_module["name"] = main.__module__
    _silence_known_warnings()
    atexit.register(collect_then_freeze)
    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # per-batch distribute chatter
    app.run(guarded(main, check, tensorflow, resumable), flags_parser=_parse_flags)
