"""Everything a model touches and nothing else: loading (full copies or LoRA adapters), chat encoding,
scoring log-probs, saving. Imports only :mod:`trainers.maths`."""
