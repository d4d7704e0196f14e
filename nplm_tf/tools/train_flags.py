"""The flags of `nplm_tf.train` and the configuration they give: a flag per `Config` field (its default the
field's, or `TRAIN_DEFAULTS` for a new run), the run's own, and `check_flags`, which refuses a bad value in one
sentence before any data is read or TensorFlow loads. Imported by the binary (and `benchmarks.brown`, which
trains as it does), never by a library.
"""

import dataclasses

from absl import flags

from nplm_tf.core import config as config_lib
from nplm_tf.core import hardware, run_dir
from nplm_tf.core.config import Config, ConfigError
from nplm_tf.core.run_dir import RunDir
from nplm_tf.network import heads
from nplm_tf.training import run_setup, strategies
from pipelines import app, corpus_flags

flags.disclaim_key_flags()  # `define` defines the flags for its caller, the binary

# A new run without flags: the shape, the average and the bound on epochs that beat Kneser-Ney on corpora it
# was not chosen on (benchmarks/README.md, "Defaults beyond Brown"), and it trains until the valid perplexity
# stops improving. The library's Config keeps the paper's MLP9 shape, 8 epochs and any gain, which configs
# written without these fields mean.
TRAIN_DEFAULTS = {
    "order": 7,
    "feature_dim": 60,
    "hidden_dim": 200,
    "average": 0.9997,
    "epochs": 40,
    "min_improvement": 0.005,
}


def define() -> None:
    """Defines `nplm_tf.train`'s flags on behalf of the binary that calls it (its --help lists them)."""
    _D = Config()
    app.define_path("model_dir", None, "Directory for checkpoints, logs and metrics.json.", required=True)
    flags.DEFINE_boolean(
        "export",
        True,
        "Write the SavedModel (MODEL_DIR/export/<version>) when training ends; --noexport leaves it to "
        "nplm_tf.export, which writes the same from the trained run at any time.",
    )
    app.define_path("config_json", None, "A JSON config (e.g. tuning's best); flags given explicitly override it.")
    flags.DEFINE_enum(
        "strategy",
        "default",
        ["default", "mirrored", "multi_worker"],
        "tf.distribute strategy; multi_worker reads the cluster from TF_CONFIG.",
    )
    flags.DEFINE_integer(
        "num_cpu_devices", 1, "Split the CPU into this many logical devices (for --strategy=mirrored)."
    )
    flags.DEFINE_integer("order", TRAIN_DEFAULTS["order"], "n: the model sees the n-1 previous words.")
    flags.DEFINE_integer("feature_dim", TRAIN_DEFAULTS["feature_dim"], "m: features per word.")
    flags.DEFINE_integer("hidden_dim", TRAIN_DEFAULTS["hidden_dim"], "h: tanh hidden units.")
    flags.DEFINE_boolean("direct", _D.direct, "Direct connections W from the word features to the output.")
    flags.DEFINE_integer("min_count", _D.min_count, "Words seen fewer times in train become <unk>.")
    flags.DEFINE_integer(
        "max_vocab",
        _D.max_vocab,
        "At most this many types, </s> and <unk> included: only the most frequent words of --min_count's are "
        "kept, the rest become <unk> (0: no limit).",
    )
    flags.DEFINE_integer(
        "epochs",
        TRAIN_DEFAULTS["epochs"],
        "Training epochs at most; --patience and --min_improvement end a run sooner.",
    )
    flags.DEFINE_integer("patience", _D.patience, "Stop after this many epochs without a better valid perplexity.")
    flags.DEFINE_float(
        "min_improvement",
        TRAIN_DEFAULTS["min_improvement"],
        "A valid perplexity counts as better (for --patience) only this share below the best so far: by default "
        "a run stops once --patience epochs gain less than 0.5% (0: any gain counts).",
    )
    flags.DEFINE_integer(
        "batch_size",
        _D.batch_size,
        "Training batch size (global, over all replicas; --strategy=mirrored: a multiple of them).",
    )
    flags.DEFINE_enum(
        "optimizer", _D.optimizer, ["sgd", "adam"], "sgd: eps_t = eps_0/(1 + r t); adam: Adam on the same schedule."
    )
    flags.DEFINE_float("learning_rate", _D.learning_rate, "eps_0.")
    flags.DEFINE_float("lr_decay", _D.lr_decay, "r, per step, in eps_t = eps_0/(1 + r t).")
    flags.DEFINE_float("weight_decay", _D.weight_decay, "lambda on H, U, W and the C rows in the window (not biases).")
    flags.DEFINE_float("dropout", _D.dropout, "Dropout on x and the tanh layer in training (not in the paper).")
    flags.DEFINE_float(
        "average",
        TRAIN_DEFAULTS["average"],
        "Keep an exponential moving average of the weights, this decay a step (e.g. 0.999): validation, the best "
        "weights and every output use it, training goes on from the raw weights (0: off; not in the paper).",
    )
    flags.DEFINE_enum(
        "precision",
        "auto",
        ["auto", "float32", "mixed_bfloat16"],
        "Compute dtype (softmax is float32 either way); auto: the faster on this machine (a run resumed keeps its own).",
    )
    flags.DEFINE_boolean("jit_compile", _D.jit_compile, "XLA-compile the whole training step (speed only).")
    flags.DEFINE_integer("shuffle_buffer", _D.shuffle_buffer, "Windows per shuffled block.")
    flags.DEFINE_integer("seed", _D.seed, "Random seed (initialization and data order).")
    flags.DEFINE_integer(
        "sync_every",
        _D.sync_every,
        "--strategy=multi_worker: 1 all-reduces the gradients every step "
        "(synchronous SGD); K > 1 lets each worker take K steps on its own batches, then averages the "
        "weights (local SGD: 1/K of the communication).",
    )
    flags.DEFINE_boolean(
        "balance_workers",
        _D.balance_workers,
        "With --sync_every=K > 1: deal each round's batches "
        "in proportion to the workers' measured speeds and average in a background thread, one round "
        "late, so no worker waits for another (the run is then not reproducible exactly).",
    )
    flags.DEFINE_integer(
        "shortlist",
        _D.shortlist,
        "N > 0: the network predicts the N most frequent words; the rest (the tail) take "
        "their probability from a Kneser-Ney n-gram (--tail=network: from a second softmax of the network), "
        "exactly normalized (0: the full softmax).",
    )
    flags.DEFINE_enum(
        "tail",
        _D.tail,
        list(config_lib.TAILS),
        "With --shortlist: 'class' (N + 1 outputs, the last 'in the tail'; "
        "Goodfellow et al. eq. 12.10), 'backoff' (N outputs scaled by the n-gram's list mass; Schwenk 2007), "
        "'sigmoid' (eq. 12.10's first form: a sigmoid output for 'in the tail', a softmax over the N list words), "
        "or 'network' (the class tail's words scored by a second softmax of the network instead of an n-gram; in "
        "training it is computed only for the targets in the tail).",
    )
    flags.DEFINE_integer(
        "tail_ngram_order", _D.tail_ngram_order, "With --shortlist: K of the tail's Kneser-Ney model (0: min(4, n))."
    )
    flags.DEFINE_string(
        "tail_ngram_prune",
        _D.tail_ngram_prune,
        "With --shortlist: prune the tail's Kneser-Ney model as nplm_tf.ngram --prune does (T1,T2,...: drop the "
        "n-grams of order k seen at most T_k times; 0,0,2: the trigrams and up seen once or twice); empty: unpruned.",
    )
    app.define_path(
        "ngram_dir",
        None,
        "With --shortlist: use this nplm_tf.ngram Kneser-Ney model for the tail (default: build one on train); the "
        "run keeps a copy, and continuing it with another is refused.",
    )
    flags.DEFINE_enum(
        "loss",
        _D.loss,
        ["softmax", "sampled_softmax", "nce"],
        "Training loss: the exact softmax, or sampled softmax / "
        "NCE against --num_sampled noise words per batch (unigram^0.75); evaluation is always exact.",
    )
    flags.DEFINE_integer("num_sampled", _D.num_sampled, "Noise words per batch for --loss=sampled_softmax or nce.")
    flags.DEFINE_float(
        "self_normalize",
        _D.self_normalize,
        "α: train the full softmax on -ln P + α·(ln Z)², so that its raw outputs are near log-probabilities "
        "(Devlin et al. 2014 used 0.1; raw scoring, Moses's NeuralLM); 0: off. Evaluation is always exact.",
    )
    flags.DEFINE_integer(
        "classes",
        _D.classes,
        "C > 0: a class-factored softmax over the whole vocabulary (Goodman 2001; Mikolov et al. 2011): the words "
        "in C frequency bands, P(w) = P(class) · P(w | class), exact; training computes C + |V|/C outputs an "
        "example instead of |V|. -1: C = ⌈√|V|⌉. 0: the full softmax.",
    )


FLAGS = flags.FLAGS


def config_from_flags() -> Config:
    """--config_json's, else (a run that exists resumes as it was set up) the model directory's config.json,
    else the flags' defaults; each flag given explicitly overrides."""
    values = {}
    if FLAGS.config_json:
        values = Config.from_json(FLAGS.config_json).to_dict()
    elif run_dir.RunDir(FLAGS.model_dir).has_config():
        try:
            values = run_dir.RunDir(FLAGS.model_dir).read_config().to_dict()
        except ConfigError:
            pass  # a damaged config.json is refused where the run is set up
    for field in dataclasses.fields(Config):
        if field.name not in values or FLAGS[field.name].present:
            values[field.name] = FLAGS[field.name].value
    if values["precision"] == "auto":
        values["precision"] = auto_precision()
    config = Config.from_dict(values)
    head = heads.kind(config)  # the options only some heads take, checked before any data is read
    for name in ("tail", "tail_ngram_order", "tail_ngram_prune", "ngram_dir"):
        if FLAGS[name].present and not config.shortlist:
            raise ConfigError(f"--{name} needs --shortlist=N > 0 (it configures the short list's tail).")
    if FLAGS["ngram_dir"].present and config.shortlist and not head.needs_ngram:
        raise ConfigError(
            f"--ngram_dir needs an n-gram tail (--tail={' or '.join(heads.ngram_tails())}); "
            f"--tail={config.tail} has none."
        )
    if FLAGS["ngram_dir"].value:
        run_dir.refuse_other_kind(FLAGS["ngram_dir"].value, "ngram_dir", "ngram")
    if FLAGS["num_sampled"].present and config.loss == "softmax":
        raise ConfigError("--num_sampled needs --loss=sampled_softmax or --loss=nce.")
    return config


_NOTES: list[str] = []  # what choosing the configuration has to say, printed once the flags are checked


def auto_precision() -> str:
    """--precision=auto: a run that exists keeps the precision it trained in (it resumes, or is done); a new
    one takes the faster on this machine, and says so."""
    run = RunDir(FLAGS.model_dir)
    if run.has_config():
        try:
            return run.read_config().precision
        except ConfigError:
            pass  # a damaged config.json is refused where the run is set up
    precision, why = hardware.fast_precision()
    _NOTES.append(f"precision: {precision} (--precision=auto: {why}; --precision=... chooses).")
    return precision


def check_flags():
    """The run's config and corpus, once every flag value that can be checked without data or TensorFlow is
    (`app.run` calls it first)."""
    strategies.check_cpu_devices(FLAGS.num_cpu_devices)
    strategies.check_cpu_split(FLAGS.num_cpu_devices, FLAGS.strategy)
    if FLAGS.strategy == "multi_worker":
        strategies.check_tf_config()
    config = config_from_flags()
    strategies.check_local_sgd(config.sync_every, FLAGS.strategy == "multi_worker")
    if FLAGS.strategy == "mirrored":  # the CPU split's replicas; GPUs are counted once TensorFlow loads (main)
        strategies.check_batch_split(config.batch_size, FLAGS.num_cpu_devices)
    corpus = corpus_flags.corpus_from_flags()  # the corpus flags checked, and that its files exist
    chose_head = any(FLAGS[name].present for name in ("shortlist", "classes", "loss"))
    if not (FLAGS.config_json or chose_head or RunDir(FLAGS.model_dir).has_config()):
        config, note = run_setup.head_for_vocabulary(config, corpus)  # a new run's default by |V|
        if note:
            _NOTES.append(note)
    while _NOTES:  # said once every flag is known to be good: a refused run prints its error alone
        print(_NOTES.pop(0), flush=True)
    return config, corpus
