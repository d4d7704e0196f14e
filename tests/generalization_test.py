"""The paper's argument for word features, on a corpus built to show it.

"the cat is eating" never occurs, and "the cat is" never occurs at all; but
"the dog is eating", "the cat was sleeping" and "the dog was sleeping" do,
among other animals, verbs and an unrelated group of nouns (furniture) that
takes adjectives. A count-based model has no evidence for the 4-gram; the
network should place C(cat) near C(dog) and so give "eating" a high
probability after "the cat is".
"""

import itertools
import math

import numpy as np
import tensorflow as tf

from nplm_tf.network import loading
from nplm_tf.training import trainer
from pipelines import corpus as corpus_lib
from tests import helpers

ANIMALS = ["dog", "horse", "bird", "cow"]
VERBS = ["eating", "sleeping", "running", "sitting"]
FURNITURE = ["table", "chair", "lamp", "desk"]
ADJECTIVES = ["red", "old", "new", "green"]


def sentences():
    out = []
    for animal, aux, verb in itertools.product(ANIMALS, ["is", "was"], VERBS):
        out.append(f"the {animal} {aux} {verb} .")
    for verb in VERBS:  # cat: only with "was"
        out.append(f"the cat was {verb} .")
    for thing, aux, adj in itertools.product(FURNITURE, ["is", "was"], ADJECTIVES):
        out.append(f"the {thing} {aux} {adj} .")
    return out


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_unseen_4gram_gets_probability_through_similar_features(tmp_path):
    lines = sentences() * 12
    assert not any("cat is" in line for line in lines)
    path = helpers.write_lines(str(tmp_path / "train.txt"), lines)
    corpus = corpus_lib.files_corpus(path, path, path)
    config = helpers.tiny_config(
        order=4,
        feature_dim=10,
        hidden_dim=24,
        epochs=25,
        patience=25,
        optimizer="adam",
        learning_rate=0.01,
        batch_size=32,
    )
    trainer.train_and_evaluate(config, str(tmp_path / "m"), corpus, verbose=0, export=False)
    _, vocab, model = loading.load_trained(str(tmp_path / "m"))
    index = {w: i for i, w in enumerate(vocab.words)}

    C = model.get_layer("nplm").C.numpy()
    sim_dog = cosine(C[index["cat"]], C[index["dog"]])
    sim_furniture = max(cosine(C[index["cat"]], C[index[w]]) for w in FURNITURE)
    assert sim_dog > sim_furniture

    def prob(context, word):
        ids = [[index[w] for w in context.split()]]  # oldest first
        return float(tf.nn.softmax(model(np.array(ids, np.int32)))[0, index[word]])

    p_cat = prob("the cat is", "eating")
    # Count-based: the 4-gram and its context are unseen, so maximum likelihood
    # gives 0 and add-one smoothing gives 1/|V|.
    add_one = 1 / vocab.size
    assert p_cat > 3 * add_one
    assert p_cat > 0.5 * prob("the dog is", "eating")
    # Verbs, not adjectives, follow "the cat is".
    assert sum(prob("the cat is", v) for v in VERBS) > 0.8
    assert math.isfinite(p_cat)
