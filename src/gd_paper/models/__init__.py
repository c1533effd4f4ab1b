"""von Oswald et al.'s attention-only models: the attention (lsa.py: its registered scorings,
linear and softmax), the model (attention_only.py) and the token layouts (layouts.py: concat,
interleaved). Every module registers its entries on import (src/registry.py's ENTRY_PACKAGES)."""
