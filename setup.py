"""nplm_tf: Bengio et al. (2003)'s neural probabilistic language model in TensorFlow/Keras."""

from setuptools import find_packages, setup

setup(
    name="nplm_tf",
    version="0.1.0",
    description="The neural probabilistic language model (Bengio et al., 2003) in TensorFlow/Keras.",
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["nplm_tf", "nplm_tf.*", "pipelines", "pipelines.*", "tuning", "tuning.*"]),
    package_data={"nplm_tf": ["configs/*.json"]},  # the shipped recipes (`train --config_json`)
    install_requires=[
        # One consistent set: TF 2.21 with its Keras 3 and tensorflow-text.
        "tensorflow==2.21.0",
        "tensorflow-text==2.21.1",
        "keras==3.15.1",
        "keras-tuner==1.4.8",
        "tensorboard==2.21.0",  # keras-tuner imports it on every trial
        "absl-py==2.5.1",
        "matplotlib==3.10.3",  # the search's results.png
        "scipy>=1.11,<2",  # with scikit-learn, keras-tuner's BayesianOptimization (tuning.search --tuner=bayesian)
        "scikit-learn>=1.3,<2",
        "numpy>=1.26,<3",
        "h5py>=3.10,<4",  # the NumPy inference path reads the saved weights without TensorFlow
    ],
    extras_require={
        # pyctcdecode (nplm_tf.interop.decoders) declares numpy<2 but runs under numpy 2, which TensorFlow 2.21 needs:
        # its own dependencies come from here, and it is installed with `pip install --no-deps pyctcdecode==0.5.0`.
        # kenlm: pyctcdecode's own KenLM language model, to compare the network with (it warns twice without it).
        "asr": ["kenlm==0.3.0", "pygtrie>=2.1,<3", "hypothesis>=6.14,<7", "jiwer>=3,<5"],
        # flashlight-text's beam search decoders, torchaudio's ctc_decoder's (nplm_tf.tools.flashlight_lm)
        "flashlight": ["flashlight-text==0.0.7"],
        "test": [
            "pytest==9.2.0",
            "pytest-xdist==3.8.0",
            "kenlm==0.3.0",  # the ARPA round trip, LanguageModel against kenlm.Model
            "ruff==0.17.6",  # the format check
            "pygtrie>=2.1,<3",
            "hypothesis>=6.14,<7",
            "jiwer>=3,<5",
            "flashlight-text==0.0.7",
        ],
    },
    entry_points={
        "console_scripts": [
            "nplm-train=nplm_tf.train:run",
            "nplm-compare=nplm_tf.compare:run",
            "nplm-evaluate=nplm_tf.evaluate:run",
            "nplm-describe=pipelines.describe:run",
            "nplm-ngram=nplm_tf.ngram:run",
            "nplm-export=nplm_tf.export:run",
            "nplm-search=tuning.search:run",
            "nplm-reproduce=nplm_tf.reproduce:run",
            "nplm-query=nplm_tf.query:run",
            "nplm-rescore=nplm_tf.rescore:run",
            "nplm-generate=nplm_tf.generate:run",
            "nplm-neighbors=nplm_tf.neighbors:run",
            "nplm-runs=nplm_tf.runs:run",
        ]
    },
)
