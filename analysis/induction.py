"""Induction and copying scores of a token model's attention heads (Olsson et al. 2022, "In-context
Learning and Induction Heads"; TransformerLens' head detector), for any run that predicts tokens with
softmax attention in every layer.

    python -m analysis.induction --run runs/<exp> [--repeat 50] [--sequences 64]

On repeated random tokens, BOS (token 0) then R random tokens then the same R again (T = 1 + 2R,
R = --repeat, capped by a learned position table), per layer and head:
  prefix     the prefix-matching score: the mean attention from each token of the second copy to
             the token after that token's first occurrence (key q − (R − 1) for query q; the
             diagonal at offset −(R − 1)), over the queries R + 1 … 2R − 1 and the sequences.
             Above 0.4 a head counts as an induction head.
  copying    the positivity Re Σλ / Σ|λ| of the eigenvalues λ of the head's OV circuit from the
             embedding to the read-out, E W_V^h W_O^h W_U [V, V] (norms left out, as TransformerLens
             does): 1 for a head that raises the logit of the token it attends to, −1 for one that
             lowers it. Its non-zero eigenvalues are those of the K x K matrix W_O^h W_U E W_V^h.
and of the model: the mean next-token loss on the first copy (positions 1 … R − 1, tokens it
cannot know) and on the second (positions R + 1 … 2R − 1, tokens it has seen), and the in-context
score, second minus first (negative: the model uses the context). Writes analysis/induction.json
and analysis/induction_heads.png.

Glossary: L layers, B sequences, H heads, T tokens, R repeated tokens, V vocabulary, D width, K head width.
"""

from __future__ import annotations

import sys

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from analysis.common import AnalysisError, analysis_command, on_request, register_analysis, settings_with
from plots.style import label_cells, new_figure, png_bytes
from src import rundir as names
from src.flags import int_at_least
from src.process import guarded
from src.read_side import PredictsTokens, read_side
from src.rundir import RunDir
from src.tasks.repeats import repeated_sequences

MODULE = "analysis.induction"
INDUCTION_HEAD = 0.4  # a head whose prefix score is above this counts as an induction head (Olsson et al.)


def prefix_scores(weights: np.ndarray, repeat: int) -> np.ndarray:
    """[L, H] from softmax weights [L, B, H, T, T] (query t, key s) on repeated_tokens: the mean of
    w[q, q − (R − 1)] over the queries q = R + 1 … 2R − 1 and the sequences."""
    queries = np.arange(repeat + 1, 2 * repeat)
    return weights[:, :, :, queries, queries - (repeat - 1)].mean(axis=(1, 3))


def positivity(matrix: np.ndarray) -> float:
    """Re Σλ / Σ|λ| over the eigenvalues λ of a square matrix (0 for the zero matrix)."""
    eigenvalues = np.linalg.eigvals(np.asarray(matrix, np.float64))
    total = np.abs(eigenvalues).sum()
    return float(eigenvalues.sum().real / total) if total > 0 else 0.0


def head_matrices(params: dict, config, layer: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(W_V^h [D, K], W_O^h [K, D]) per head] of a softmax layer's fused qkv and out projections
    (src/models/mixers/kit.py project_qkv: q, then k and v of H_kv heads each; H_kv = 1 for MQA)."""
    root = f"{config.preset}/block_{layer}/seq_mixer"
    qkv, out = np.asarray(params[f"{root}/qkv"]["w"]), np.asarray(params[f"{root}/out"]["w"])
    heads = config.n_head
    k = config.width // heads
    kv_heads = (qkv.shape[1] // k - heads) // 2
    v_start = (heads + kv_heads) * k
    return [(qkv[:, v_start + (h * kv_heads // heads) * k :][:, :k], out[h * k : (h + 1) * k]) for h in range(heads)]


def read_in_out(params: dict, config) -> tuple[np.ndarray, np.ndarray]:
    """(E [V, D], W_U [D, V]): the embedding and the read-out (the tied table transposed)."""
    embed = np.asarray(params[f"{config.preset}/embed"]["embeddings"])
    unembed = embed.T if config.tie_embeddings else np.asarray(params[f"{config.preset}/unembed"]["w"])
    return embed, unembed


def copying_scores(params: dict, config) -> np.ndarray:
    """[L, H]: each head's OV-circuit positivity (module docstring)."""
    embed, unembed = read_in_out(params, config)
    return np.array(
        [
            [positivity(w_o @ unembed @ embed @ w_v) for w_v, w_o in head_matrices(params, config, layer)]
            for layer in range(config.n_layer)
        ]
    )


def attention_and_logits(config, params, state, tokens) -> tuple[np.ndarray, np.ndarray]:
    """(softmax weights [L, B, H, T, T], logits [B, T, V]) of the model on `tokens`."""
    from src.models.mixers.attention import recording_attention
    from src.models.sequence import SequenceModel

    transformed = hk.without_apply_rng(hk.transform_with_state(lambda t: SequenceModel(config)(t)))
    with recording_attention():
        logits, recorded = jax.jit(transformed.apply)(params, state, tokens)
    layers = [
        recorded.get(f"{config.preset}/block_{i}/seq_mixer", {}).get("attention_weights") for i in range(config.n_layer)
    ]
    if any(w is None for w in layers):
        raise AnalysisError(
            f"the mixer {config.mixer_label()!r} forms no softmax weights in every layer; accepted: a model "
            "whose every layer is softmax attention (softmax_causal, local, local_global, mqa)"
        )
    return np.stack([np.asarray(w) for w in layers]), np.asarray(logits)


def losses(logits: np.ndarray, tokens: np.ndarray, repeat: int) -> tuple[float, float]:
    """(first, second): mean next-token cross-entropy at positions 1 … R − 1 and R + 1 … 2R − 1."""
    log_q = np.asarray(jax.nn.log_softmax(jnp.asarray(logits, jnp.float32), axis=-1))
    nll = -np.take_along_axis(log_q[:, :-1], tokens[:, 1:, None], axis=-1)[..., 0]  # [B, T − 1], position t
    return float(nll[:, 1:repeat].mean()), float(nll[:, repeat + 1 : 2 * repeat].mean())


def usable_repeat(config, repeat: int) -> int:
    """R within the model's position table (a learned table holds max_tokens = 1 + 2R at most)."""
    limit = config.encoding().max_tokens()
    if limit is not None and 1 + 2 * repeat > limit:
        repeat = (limit - 1) // 2
    if repeat < 2:
        raise AnalysisError(f"the model reads at most {limit} tokens; accepted: a model of at least 5 (R >= 2)")
    return repeat


def run(run_dir: RunDir, repeat: int = 50, sequences: int = 64, seed: int = 0) -> dict:
    settings = settings_with(run_dir, PredictsTokens)
    model, params, state = read_side(PredictsTokens, settings).restore(run_dir)
    config = settings.model
    used = usable_repeat(config, repeat)
    tokens = repeated_sequences(jax.random.key(seed), sequences, used, config.vocab_size)
    weights, logits = attention_and_logits(config, params, state, tokens)
    prefix = prefix_scores(weights, used)
    copying = copying_scores(params, config)
    first, second = losses(logits, np.asarray(tokens), used)
    heads = [
        {
            "layer": layer,
            "head": head,
            "prefix": round(float(prefix[layer, head]), 6),
            "copying": round(float(copying[layer, head]), 6),
        }
        for layer in range(prefix.shape[0])
        for head in range(prefix.shape[1])
        if prefix[layer, head] > INDUCTION_HEAD
    ]
    out = {
        "mixer": config.mixer_label(),
        "task": settings.task.name,
        "repeat": used,
        "sequences": sequences,
        "vocab_size": config.vocab_size,
        "prefix": prefix.round(6).tolist(),
        "copying": copying.round(6).tolist(),
        "loss_first_repeat": round(first, 6),
        "loss_second_repeat": round(second, 6),
        "in_context_score": round(second - first, 6),
        "induction_heads": heads,
        "threshold": INDUCTION_HEAD,
    }
    run_dir.write_json(names.INDUCTION_JSON, out)
    run_dir.write_bytes(names.INDUCTION_PNG, png_bytes(figure(out, run_dir.name)))
    return out


register_analysis(
    "induction",
    run,
    "prefix-matching and copying scores of every attention head on repeated tokens (Olsson et al.; on request)",
    on_request,
    files=[names.INDUCTION_JSON, names.INDUCTION_PNG],
)


def figure(summary: dict, title: str):
    fig = new_figure(7.0, 0.5 * len(summary["prefix"]) + 2.0, constrained=True)
    for i, (key, label, low) in enumerate(
        (("prefix", "prefix-matching score", 0.0), ("copying", "copying score", -1.0))
    ):
        ax = fig.add_subplot(1, 2, i + 1)
        grid = np.asarray(summary[key], float)
        image = ax.imshow(grid, vmin=low, vmax=1.0, cmap="viridis", aspect="auto")
        label_cells(ax, grid, "{:.2f}", grid < 0.5, 7)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(label, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.05)
    fig.suptitle(
        f"{title}: {summary['mixer']} on {summary['task']}; repeated tokens R = {summary['repeat']}, loss "
        f"{summary['loss_first_repeat']:.2f} (first copy) -> {summary['loss_second_repeat']:.2f} (second)",
        fontsize=8,
    )
    return fig


def _flags(parser) -> None:
    parser.add_argument("--repeat", type=int_at_least(2, 10_000), default=50, help="R random tokens, repeated once")
    parser.add_argument("--sequences", type=int_at_least(1, 100_000), default=64, help="repeated sequences")


def _print(args, run_dir: RunDir) -> None:
    out = run(run_dir, args.repeat, args.sequences)
    found = ", ".join(f"L{h['layer']}H{h['head']} ({h['prefix']:.2f})" for h in out["induction_heads"]) or "none"
    print(f"prefix-matching scores above {INDUCTION_HEAD}: {found}")
    print(
        f"loss on the first copy {out['loss_first_repeat']:.3f}, on the second {out['loss_second_repeat']:.3f} "
        f"(in-context score {out['in_context_score']:+.3f})"
    )
    print(f"-> {run_dir.file(names.INDUCTION_PNG)}")


main = analysis_command(MODULE, __doc__, _flags, _print)


if __name__ == "__main__":
    sys.exit(guarded(main))
