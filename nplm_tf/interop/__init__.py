"""The model inside other programs: KenLM's Python interface (`LanguageModel`), pyctcdecode's and
flashlight-text's decoders, and text generated without TensorFlow (`generation`)."""
