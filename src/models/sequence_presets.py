"""The presets of the one sequence family (src/models/sequence.py): the only place the originals'
models are named, and the blocks a model can take.

Presets: `gpt2` (Garg et al.: layer norm, GELU MLP, learned positions, read-out at the x tokens),
`lstm` (Garg et al.'s recurrent model: LSTM layers stacked with no residual, norm or position
encoding, `residual` false), `lm` (the Zoology recipe: RMS norm, the state mixer of choice, a
truncated-normal learned table), and the length study's two backbones (Lin et al. AAAI 2025,
Hugging Face's models): `llama` (RMS norm ε 1e-6, SwiGLU with hidden 4D, the position encoding
inside attention, rope by default, no biases; sizes tiny / small / standard / large) and `mamba`
(RMS norm ε 1e-5, the Mamba mixer, no state sublayer, no position encoding, no biases), and
`induction` (Edelman et al. 2024's attention-only transformer for in-context Markov chains:
layer norm, softmax attention with relative key vectors, no state sublayer, no biases).

Blocks (`with_block`, `block_of`): `ours` is the settings as they are; `zoology` is Zoology's own
TransformerBlock (layer norm, the `identity` state mixer, positions for attention only, dropout
0.1 on the embeddings and on attention's weights, attention biases, the tied read-out).
Glossary: D width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import replace

from src.models.sequence import SequenceConfig
from src.registry import Choice, choice
from src.settings import require_one_of


def gpt2(
    n_dims: int = 5,
    n_embd: int = 64,
    n_head: int = 4,
    n_layer: int = 3,
    n_positions: int = 11,
    mixer: Choice | None = None,
    position: Choice | None = None,
) -> SequenceConfig:
    """Garg et al.'s GPT-2 (its own names): layer norm, GELU MLP, learned positions over
    2 n_positions tokens."""
    return SequenceConfig(
        "gpt2",
        "pairs",
        n_embd,
        n_layer,
        n_head,
        n_dims,
        0,
        2 * n_positions,
        position or choice("position", "learned"),
        choice("norm", "layer_norm"),
        mixer or choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "mlp"),
    )


def lm(
    width: int = 128,
    n_layer: int = 2,
    n_head: int = 8,
    max_len: int = 64,
    vocab_size: int = 8192,
    n_dims: int = 5,
    inputs: str = "tokens",
    seq_mixer: Choice | None = None,
    state_mixer: Choice | None = None,
) -> SequenceConfig:
    """The Zoology recipe's language model: RMS norm, a truncated-normal learned table."""
    return SequenceConfig(
        "lm",
        inputs,
        width,
        n_layer,
        n_head,
        n_dims,
        vocab_size,
        max_len,
        choice("position", "learned", truncated=True),
        choice("norm", "rms_norm"),
        seq_mixer or choice("seq_mixer", "softmax_causal"),
        state_mixer or choice("state_mixer", "mlp"),
    )


# The length study's Llama sizes (its configs/base_model/llama/*.yaml): width, layers, heads
LLAMA_SIZES = {"tiny": (256, 2, 4), "small": (256, 4, 4), "standard": (256, 16, 8), "large": (512, 16, 8)}
# ... and its Mamba (configs/base_model/mamba/standard.yaml): width, layers
MAMBA_SIZES = {"standard": (256, 32)}


def llama(
    size: str = "standard", n_dims: int = 20, max_tokens: int = 102, position: Choice | None = None, **overrides
) -> SequenceConfig:
    """The length study's Llama (Hugging Face LlamaModel as its build_model configures it):
    RMS norm (ε 1e-6), SwiGLU with intermediate size 4D, attention with the chosen encoding
    (rope, θ 1e4, by default), no biases; `overrides` replace width, n_layer, n_head."""
    width, n_layer, n_head = LLAMA_SIZES[size]
    config = SequenceConfig(
        "llama",
        "pairs",
        width,
        n_layer,
        n_head,
        n_dims,
        0,
        max_tokens,
        position or choice("position", "rope"),
        choice("norm", "rms_norm", eps=1e-6),
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "swiglu", hidden_ratio=4.0),
        biases=False,
    )
    return replace(config, **overrides)


def mamba(
    size: str = "standard", n_dims: int = 20, max_tokens: int = 102, mixer: Choice | None = None, **overrides
) -> SequenceConfig:
    """The length study's Mamba (Hugging Face MambaModel): blocks of RMS norm (ε 1e-5) and the
    Mamba mixer (state 16, expand 2, conv 4) with no state sublayer, no position encoding, no
    biases; `overrides` replace width, n_layer."""
    width, n_layer = MAMBA_SIZES[size]
    config = SequenceConfig(
        "mamba",
        "pairs",
        width,
        n_layer,
        1,
        n_dims,
        0,
        max_tokens,
        choice("position", "nope"),
        choice("norm", "rms_norm", eps=1e-5),
        mixer or choice("seq_mixer", "mamba"),
        choice("state_mixer", "none"),
        biases=False,
    )
    return replace(config, **overrides)


def induction(
    vocab_size: int = 2, max_tokens: int = 100, width: int = 16, n_layer: int = 2, n_head: int = 1
) -> SequenceConfig:
    """Edelman et al.'s attention-only transformer (statistical induction heads): token inputs,
    pre-norm layer norm, softmax attention whose scores add q_i·r_{i−j} (learned relative key
    vectors per layer, position `relative`), no state sublayer, a final norm and an unembedding,
    no biases. 2 layers of 1 head at width 16 by default, as the paper's."""
    return SequenceConfig(
        "induction",
        "tokens",
        width,
        n_layer,
        n_head,
        1,
        vocab_size,
        max_tokens,
        choice("position", "relative"),
        choice("norm", "layer_norm"),
        choice("seq_mixer", "softmax_causal"),
        choice("state_mixer", "none"),
        biases=False,
    )


def lstm(n_dims: int = 5, n_embd: int = 64, n_layer: int = 3, n_positions: int = 11) -> SequenceConfig:
    """Garg et al.'s recurrent model: the read-in, n_layer LSTM layers of width n_embd stacked
    plainly (no residual, no norm, no position encoding, no state sublayer: torch's
    nn.LSTM(num_layers)), the read-out at the x tokens."""
    return SequenceConfig(
        "lstm",
        "pairs",
        n_embd,
        n_layer,
        1,
        n_dims,
        0,
        2 * n_positions,
        choice("position", "nope"),
        choice("norm", "none"),
        choice("seq_mixer", "lstm"),
        choice("state_mixer", "none"),
        residual=False,
    )


BLOCKS = ("ours", "zoology")  # with_block's names


def with_block(config: SequenceConfig, block: str) -> SequenceConfig:
    """`config` with the block `block` (BLOCKS): `ours` leaves it as it is; `zoology` is Zoology's
    TransformerBlock as its figure-2 configs build it (zoology/model.py, zoology/config.py,
    zoology/mixers/attention.py): layer norm (ε 1e-5), the state mixer torch.nn.Identity, whose
    pre-norm residual form adds the normed stream back (h += LN(h), our `identity`), learned
    positions from N(0, 0.02²) for a model with attention only, dropout 0.1 on the embeddings and on
    attention's softmax weights (MHA's dropout) in training, attention projections with biases, and
    (token inputs) the read-out tied to the embedding table."""
    require_one_of("block", block, BLOCKS)
    if block == "ours":
        return config

    def attention(mixer: Choice) -> Choice:
        if mixer.name != "softmax_causal":
            return mixer
        return Choice(mixer.name, replace(mixer.options, dropout=0.1, bias=True))

    return replace(
        config,
        norm=choice("norm", "layer_norm", eps=1e-5),
        state_mixer=choice("state_mixer", "identity"),
        position=choice("position", "learned"),
        positions_for="attention",
        embed_dropout=0.1,
        tie_embeddings=config.inputs == "tokens",
        seq_mixer=attention(config.seq_mixer),
        seq_mixers=tuple(attention(m) for m in config.seq_mixers),
    )


def block_of(config: SequenceConfig) -> str:
    """The name in BLOCKS whose block `config` has: `zoology` where with_block(config, "zoology")
    changes nothing, `ours` otherwise."""
    return "zoology" if with_block(config, "zoology") == config else "ours"
