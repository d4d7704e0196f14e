"""One shared helper for the tests: tiny corpora, tiny configs, binary runs, the project's source read without
importing it."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from nplm_tf.core.config import Config
from pipelines import interrupts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_NLTK = os.path.join(os.path.dirname(ROOT), "shared", "nltk_data")
PACKAGES = ("pipelines", "nplm_tf", "tuning", "benchmarks", "tests")  # the project's top-level packages


# tiny_config's settings as flags of the binaries.
TINY_FLAGS = [
    "--order=3",
    "--feature_dim=8",
    "--hidden_dim=16",
    "--min_count=1",
    "--batch_size=16",
    "--learning_rate=0.01",
    "--lr_decay=0",
    "--weight_decay=0",
    "--precision=float32",
    "--shuffle_buffer=64",
    "--average=0",  # the paper's weights, not `train`'s default average of them
]


def write_arpa(path: str, entries: dict, order: int, line) -> None:
    """An ARPA file of `entries` (n-gram tuple -> (log10 p, log10 β)), orders 1 to `order`, each n-gram's line
    as `line(gram, p, b)` spells it (its fields and newline)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\\data\\\n")
        for k in range(1, order + 1):
            f.write(f"ngram {k}={sum(len(g) == k for g in entries)}\n")
        for k in range(1, order + 1):
            f.write(f"\n\\{k}-grams:\n")
            f.writelines(line(gram, p, b) for gram, (p, b) in entries.items() if len(gram) == k)
        f.write("\n\\end\\\n")


def files_flags(paths: dict[str, str]) -> list[str]:
    """The corpus flags of `tiny_corpus_files`' paths."""
    return [
        "--corpus=files",
        f"--train_files={paths['train']}",
        f"--valid_files={paths['valid']}",
        f"--test_files={paths['test']}",
    ]


def tiny_config(**changes) -> Config:
    """A config small enough to train in seconds on 2 CPU cores."""
    base = dict(
        order=3,
        feature_dim=8,
        hidden_dim=16,
        min_count=1,
        epochs=2,
        batch_size=16,
        learning_rate=0.01,
        lr_decay=0.0,
        weight_decay=0.0,
        precision="float32",
        shuffle_buffer=64,
        patience=5,
        seed=7,
    )
    base.update(changes)
    return Config(**base)


def write_lines(path: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def vocabulary_files(directory, types: int, repeat: int = 1, context: int = 5) -> dict[str, str]:
    """A corpus's files whose train holds the words w0 … w{types-1}, 50 a line, each `repeat` times (|V| = types + 2
    at --min_count=repeat), and whose valid and test are one line of the first `context` of them."""
    train = [" ".join(f"w{i}" for i in range(j, min(j + 50, types))) for j in range(0, types, 50)] * repeat
    line = [" ".join(f"w{i}" for i in range(context))]
    splits = (("train", train), ("valid", line), ("test", line))
    return {name: write_lines(os.path.join(str(directory), f"{name}_{types}.txt"), lines) for name, lines in splits}


def synthetic_texts(seed: int, count: int) -> list[str]:
    """Sentences from a small grammar: enough structure to learn, no randomness in the rules."""
    import random

    rng = random.Random(seed)
    subjects = ["the cat", "the dog", "a bird", "my friend", "the teacher"]
    verbs = ["sees", "likes", "finds", "follows"]
    objects = ["the ball", "a tree", "the house", "some food"]
    return [
        " ".join(
            f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} ." for _ in range(rng.randint(2, 5))
        )
        for _ in range(count)
    ]


def tiny_corpus_files(tmp_path, train: int = 60, valid: int = 10, test: int = 10) -> dict[str, str]:
    paths = {}
    for i, (name, count) in enumerate((("train", train), ("valid", valid), ("test", test))):
        paths[name] = write_lines(os.path.join(str(tmp_path), f"{name}.txt"), synthetic_texts(i, count))
    return paths


def run_binary(
    module: str,
    *args: str,
    env: dict | None = None,
    timeout: int = 300,
    cwd: str = ROOT,
    input: str | bytes | None = None,
) -> subprocess.CompletedProcess:
    """`python -m module args` in `cwd` (the repository's root; elsewhere, with the root on PYTHONPATH), `input` on
    its standard input, to its end; past `timeout` seconds it is killed and TimeoutExpired raised. Its output is
    text, or bytes where `input` is. Where it runs: `start_binary`."""
    process = start_binary(module, *args, env=env, cwd=cwd, input=input)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise subprocess.TimeoutExpired(process.args, timeout, stdout, stderr) from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def start_binary(
    module: str, *args: str, env: dict | None = None, cwd: str = ROOT, input: str | bytes | None = None
) -> subprocess.Popen | ForkedBinary:
    """`python -m module args` started and left running, as `subprocess.Popen` would leave it (pid, args,
    returncode, poll, wait, send_signal, kill, communicate), its output text or, where `input` is, bytes. It
    runs in a child of `tests.forkserver` (TensorFlow already imported) unless the environment changes
    Python's path (`without_tensorflow`: what a fresh interpreter loads is then the point) or
    NPLM_TF_TESTS_FRESH=1 asks for a fresh interpreter every time."""
    full_env = dict(os.environ)
    full_env.setdefault("NLTK_DATA", SHARED_NLTK)
    if cwd != ROOT:
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, full_env.get("PYTHONPATH")) if p)
    full_env.update(env or {})
    text = not isinstance(input, bytes)
    data = (input or "").encode("utf-8") if text else input
    if os.environ.get("NPLM_TF_TESTS_FRESH") != "1" and "PYTHONPATH" not in (env or {}):
        return _fork_server().start(module, list(args), full_env, cwd, data, text)
    import tempfile

    with tempfile.TemporaryFile() as stdin:
        stdin.write(data)
        stdin.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=full_env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=text,
        )


class ForkedBinary:
    """A binary running in a child of `tests.forkserver`: `subprocess.Popen`'s methods that the tests use."""

    def __init__(self, server: _ForkServer, key: int, pid: int, args: list[str], paths: dict[str, str], text: bool):
        self.server, self.key, self.pid, self.args, self.paths, self.text = server, key, pid, args, paths, text
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.status(self.key, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.status(self.key, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str] | tuple[bytes, bytes]:
        """(stdout, stderr) once it has ended; past `timeout`, TimeoutExpired and it runs on, as with Popen."""
        self.wait(timeout)
        outputs = []
        for name in ("stdout", "stderr"):
            with open(self.paths[name], "rb") as f:
                data = f.read()
            outputs.append(data.decode("utf-8", errors="replace") if self.text else data)
        return outputs[0], outputs[1]


class _ForkServer:
    """This test process's `tests.forkserver`, started on first use and again if it died; a reader thread
    files its answers by request id."""

    def __init__(self):
        import atexit
        import itertools
        import tempfile
        import threading

        self.process = None
        self.answers: dict[int, dict] = {}
        self.issued: dict[subprocess.Popen, list[int]] = {}  # each server's request ids
        self.changed = threading.Condition()
        self.ids = itertools.count()
        self.scratch = tempfile.mkdtemp(prefix="nplm_tf_forkserver_")
        atexit.register(self.close)

    def close(self) -> None:
        import shutil

        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()  # the server kills what still runs and exits
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def launch(self) -> None:
        import threading

        env = dict(os.environ)
        env.setdefault("NLTK_DATA", SHARED_NLTK)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self.read, args=(self.process,), daemon=True).start()

    def read(self, process: subprocess.Popen) -> None:
        import json

        for line in process.stdout:
            message = json.loads(line)
            with self.changed:
                self.answers.setdefault(message.pop("id"), {}).update(message)
                self.changed.notify_all()
        with self.changed:  # the server ended: nothing more will be answered about its children
            for key in self.issued.pop(process, ()):
                if key in self.answers:
                    self.answers[key].setdefault("pid", None)
                    self.answers[key].setdefault("status", None)
            self.changed.notify_all()

    def answer(self, key: int, field: str, timeout: float | None) -> dict | None:
        with self.changed:
            if not self.changed.wait_for(lambda: field in self.answers.get(key, {}), timeout):
                return None
            answer = self.answers[key]
            if answer[field] is None:
                raise RuntimeError("tests.forkserver ended unexpectedly")
            return answer

    def status(self, key: int, timeout: float | None) -> int | None:
        answer = self.answer(key, "status", timeout)
        if answer is None:
            return None
        with self.changed:
            del self.answers[key]
        return answer["status"]

    def start(self, module, args, env, cwd, data: bytes, text: bool) -> ForkedBinary:
        import json

        with self.changed:
            if self.process is None or self.process.poll() is not None:
                self.launch()
            key = next(self.ids)
            self.answers[key] = {}
            self.issued.setdefault(self.process, []).append(key)
            paths = {name: os.path.join(self.scratch, f"{key}.{name}") for name in ("stdin", "stdout", "stderr")}
            with open(paths["stdin"], "wb") as f:
                f.write(data)
            for name in ("stdout", "stderr"):
                open(paths[name], "wb").close()
            request = {"id": key, "module": module, "args": args, "env": env, "cwd": os.path.abspath(cwd), **paths}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        pid = self.answer(key, "pid", None)["pid"]
        command = [sys.executable, "-m", module, *args]
        return ForkedBinary(self, key, pid, command, paths, text)


_SERVER: list[_ForkServer] = []


def _fork_server() -> _ForkServer:
    if not _SERVER:
        _SERVER.append(_ForkServer())
    return _SERVER[0]


def without_tensorflow(root) -> dict[str, str]:
    """`run_binary`'s env in which importing TensorFlow fails (a package of its name first on the path): a
    binary run in it shows that it answered without loading TensorFlow (seconds on 2 CPUs)."""
    package = os.path.join(str(root), "no_tensorflow", "tensorflow")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8") as f:
        f.write('raise ImportError("TensorFlow was loaded (tests.helpers.without_tensorflow)")\n')
    return {"PYTHONPATH": os.path.dirname(package)}


def error_lines(stderr: str) -> list[str]:
    """The binary's own error sentences (TensorFlow's start-up log lines left out)."""
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def assert_one_sentence(result: subprocess.CompletedProcess, message: str) -> None:
    """A binary refused its input: a non-zero exit and exactly one error sentence, which contains `message`."""
    errors = error_lines(result.stderr)
    assert result.returncode != 0 and len(errors) == 1 and message in errors[0], result.stderr[-2000:]


def check_top_k_generation(served, prompt: str, k: int, rows: int = 3000, temperature: float = 0.7) -> None:
    """A SavedModel's `generate` with top_k = k: each row's first word is one of `next_word`'s k best that
    is not `<unk>`, drawn with probability ∝ P^(1/temperature) (within 4.5 standard errors over `rows` rows),
    and greedy generation takes the best of them."""
    import numpy as np
    import tensorflow as tf

    best = served.signatures["next_word"](text=tf.constant([prompt]), k=tf.constant(k + 1))
    words = [w.decode() for w in best["words"].numpy()[0]]
    probs = best["probabilities"].numpy()[0].astype(np.float64)
    kept = [i for i, w in enumerate(words) if w != "<unk>"][:k]
    expected = probs[kept] ** (1 / temperature)
    expected /= expected.sum()
    args = dict(max_tokens=tf.constant(1), top_k=tf.constant(k), seed=tf.constant(7, tf.int64))
    drawn = served.signatures["generate"](
        prompt=tf.constant([prompt] * rows), temperature=tf.constant(temperature), allow_unk=tf.constant(False), **args
    )["continuation"].numpy()
    drawn = [w.decode() for w in drawn]
    assert set(drawn) <= {words[i] for i in kept}, (set(drawn), [words[i] for i in kept])
    assert_drawn_in_proportion(np.array([drawn.count(words[i]) for i in kept]) / rows, expected, rows, 4.5)
    greedy = served.signatures["generate"](
        prompt=tf.constant([prompt]), temperature=tf.constant(0.0), allow_unk=tf.constant(False), **args
    )["continuation"].numpy()[0]
    assert greedy.decode() == words[kept[0]]


def check_sampled_generation(served, prompt: str, rows: int = 4000) -> None:
    """A SavedModel's `generate` at temperature 1 over every word (top_k = 0): each row's first word is drawn
    with its `next_word` probability, `<unk>` left out and the rest renormalized (within 5 standard errors
    over `rows` rows); `</s>` is drawn as an empty continuation."""
    import numpy as np
    import tensorflow as tf

    ranked = served.signatures["next_word"](text=tf.constant([prompt]), k=tf.constant(1_000_000))
    words = [w.decode() for w in ranked["words"].numpy()[0]]
    expected = np.where(np.array(words) == "<unk>", 0.0, ranked["probabilities"].numpy()[0].astype(np.float64))
    expected /= expected.sum()
    drawn = served.signatures["generate"](
        prompt=tf.constant([prompt] * rows),
        max_tokens=tf.constant(1),
        temperature=tf.constant(1.0),
        top_k=tf.constant(0),
        seed=tf.constant(11, tf.int64),
        allow_unk=tf.constant(False),
    )["continuation"].numpy()
    drawn = [w.decode() or "</s>" for w in drawn]
    assert set(drawn) <= {w for w, p in zip(words, expected) if p > 0}, set(drawn)
    assert_drawn_in_proportion(np.array([drawn.count(w) for w in words]) / rows, expected, rows, 5)


def check_rows_in_chunks(
    monkeypatch, model, vocab, vocab_path: str, corpus, ngram=None, temperatures=(3.0,), next_word_chunks=True
):
    """`server.Server`'s next_word and generate on 40 rows of test under a limit of 16 rows at a time (three
    chunks of 14), eagerly and traced: no network call sees more than 16 rows (but next_word's, where
    `next_word_chunks` is False: a class or back-off short list's own ranking holds no (rows, |V|) tensor);
    the same top words as without the limit, the same greedy text; draws the same each time, the first
    chunk's those of a request of 14, the other chunks' with seeds of their own (none repeating another's for
    one prompt 40 times)."""
    import numpy as np
    import tensorflow as tf

    from nplm_tf.core import config as config_lib
    from nplm_tf.serving import server as server_lib

    lines = [line for line in corpus["test"].iter_lines() if line.split()]
    texts = tf.constant([" ".join(line.split()[: 1 + i % 5]) for i, line in enumerate(lines * 40)][:40])
    whole = server_lib.Server(model, vocab, vocab_path, ngram)
    assert whole.row_chunk == server_lib.ROW_CHUNK
    with monkeypatch.context() as patch:
        patch.setattr(config_lib, "LOGITS_PER_BATCH", 16 * max(vocab.size, whole.outputs))
        small = server_lib.Server(model, vocab, vocab_path, ngram)
    assert small.row_chunk == 16
    hidden, bound = small.hidden, tf.Variable(16)  # every path to the network's outputs goes through `hidden`

    def bounded(context, member=0, hidden=hidden):
        tf.debugging.assert_less_equal(tf.shape(context)[0], bound, "a chunk of more than its rows")
        return hidden(context, member)

    small.hidden = bounded
    for server in (small, whole):  # eagerly and as the SavedModel's graph runs it (tensor arguments: one trace)
        server.graph_next_word = tf.function(server.next_word)
        server.graph_generate = tf.function(server.generate)
    one_request = 16 if next_word_chunks else 40
    for eager in (True, False):
        next_word = small.next_word if eager else small.graph_next_word
        generate = small.generate if eager else small.graph_generate
        bound.assign(one_request)
        assert next_word(texts, tf.constant(0))["words"].shape == (40, 0)  # chunks of nothing join too
        got, expected = next_word(texts, tf.constant(7)), whole.next_word(texts, tf.constant(7))
        assert got["words"].shape == (40, 7)
        np.testing.assert_array_equal(got["words"].numpy(), expected["words"].numpy())
        np.testing.assert_allclose(got["probabilities"].numpy(), expected["probabilities"].numpy(), rtol=1e-5)
        bound.assign(16)
        for temperature in temperatures:
            for top_k in (0, 4):  # every word's distribution; next_word's 4 best
                args = [tf.constant(3), tf.constant(temperature), tf.constant(top_k), tf.constant(11, tf.int64)]
                if eager and temperature == temperatures[0] and top_k == 0:
                    empty = generate(texts, tf.constant(0), *args[1:])
                    assert empty["generated_tokens"].numpy().tolist() == [0] * 40
                got = generate(texts, *args)["continuation"].numpy()
                again = small.graph_generate(texts, *args)["continuation"].numpy()
                expected = whole.graph_generate(texts, *args)["continuation"].numpy()
                np.testing.assert_array_equal(got, again)  # the same draws each time
                np.testing.assert_array_equal(again[:14], expected[:14])  # the first chunk: as a request of 14
                assert (again[14:] != expected[14:]).any()  # the others with seeds of their own
                same = small.graph_generate(tf.fill([40], texts[0]), *args)["continuation"].numpy()
                assert (same[:14] != same[14:28]).any()  # one prompt 40 times: no chunk repeats another's
                greedy = [args[0], tf.constant(0.0), *args[2:]]
                np.testing.assert_array_equal(
                    small.graph_generate(texts, *greedy)["continuation"].numpy(),
                    whole.graph_generate(texts, *greedy)["continuation"].numpy(),
                )


def assert_drawn_in_proportion(frequency, expected, draws: int, sigmas: float) -> None:
    """Each observed frequency (any shape) lies within `sigmas` binomial standard errors of its expected
    probability over `draws` draws."""
    import numpy as np

    error = np.sqrt(expected * (1 - expected) / draws)
    gap = np.abs(frequency - expected)
    assert np.all(gap <= sigmas * error + 1e-9), (gap.max(), frequency, expected)


@contextlib.contextmanager
def remembering_interrupts() -> Iterator[None]:
    """`pipelines.interrupts` installed in this (main) thread for the block, whatever SIGINT was before."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert interrupts.install()
        yield
    finally:
        interrupts.reset()
        signal.signal(signal.SIGINT, previous)


class DropsAnInterrupt:
    """Sends SIGINT to this process from its `__del__`: the handler runs there, and Python drops (prints as
    "Exception ignored") the KeyboardInterrupt it raises, as when Ctrl-C lands in a TensorFlow or h5py
    object's clean-up."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def module_file(name: str) -> str | None:
    """The project file of a dotted module name (a package's __init__.py), or None."""
    base = os.path.join(*name.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


def _imports_by_name(node: ast.AST) -> bool:
    """Whether `node` is a call `importlib.import_module("a.literal.name")`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "importlib"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def imports_of(path: str, packages: bool = False) -> tuple[set[str], set[str]]:
    """(project files, third-party top-level names) that the module at `path` imports, anywhere in it; a
    package's `__init__.py` among them only with `packages`."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    project, external = set(), set()

    def add(name):
        top = name.split(".")[0]
        if top in PACKAGES:
            found = module_file(name)
            if found is None:
                raise AssertionError(f"{path} imports {name}, which is not in the tree")
            project.add(found)
        elif top not in sys.stdlib_module_names and top != "__future__":
            external.add(top)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # `from pkg import module` names a module; `from module import name` does not
                full = f"{node.module}.{alias.name}"
                add(full if node.module.split(".")[0] in PACKAGES and module_file(full) else node.module)
        elif _imports_by_name(node):  # importlib.import_module("name"): an import made on first use
            add(node.args[0].value)
    project.discard(path)
    return {p for p in project if packages or not p.endswith("__init__.py")}, external


def console_scripts(text=None) -> dict[str, str]:
    """setup.py's console scripts, name -> "module:function", read from its source (nothing installed)."""
    if text is None:
        with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
            text = f.read()
    for node in ast.walk(ast.parse(text, "setup.py")):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            entries = ast.literal_eval(node.value)["console_scripts"]
            return dict(entry.replace(" ", "").split("=", 1) for entry in entries)
    raise AssertionError("setup.py has no entry_points")
