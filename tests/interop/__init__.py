import os

# litellm (under openpipe-art) fetches a model price list when imported; the suite reaches no network
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
