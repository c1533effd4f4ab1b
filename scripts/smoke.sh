#!/usr/bin/env bash
# Day-1 smoke battery: a handful of tiny runs that toggle ordering and noise on both
# runners (train and eval settings, all with --save_attention), quick attention
# heatmaps for each, then a check that every expected artifact exists. Fails loudly:
# exit non-zero, naming the missing file (or the command that failed).
#
#   bash scripts/smoke.sh            (or: make smoke_train)
#
# Environment: PYTHON (default .venv/bin/python), SMOKE_STEPS (default 50),
# SMOKE_DIR (default runs; the runs are <SMOKE_DIR>/smoke_*).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
STEPS=${SMOKE_STEPS:-50}
DIR=${SMOKE_DIR:-runs}
export PYTHONPATH=.
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$PWD/runs/.jax_cache}
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
TINY=(--steps "$STEPS" --batch_size 256 --eval_size 500 --log_every 25 --overwrite --quiet --save_attention)

fail() { echo "SMOKE FAILED: $*" >&2; exit 1; }

if [ ! -x "$PYTHON" ]; then
  fail "$PYTHON not found; create the environment first with: make venv"
fi

run() {  # run NAME RUNNER FLAGS...
  local name=$1 runner=$2; shift 2
  echo "== $name: python -m runners.$runner $*"
  "$PYTHON" -m "runners.$runner" --out "$DIR/$name" "${TINY[@]}" "$@" \
    || fail "python -m runners.$runner --out $DIR/$name $* exited with code $?"
  "$PYTHON" -m plots.attention_quick --run "$DIR/$name" >/dev/null \
    || fail "python -m plots.attention_quick --run $DIR/$name exited with code $?"
}

# Ordering + label noise on both (train and eval), corrupted pairs last.
run smoke_concat_order_noise run_concat_inputs_targets \
  --ordering smallnorm2largenorm --noise_mode label_noise --noise_p 0.3 --noise_sigma 0.5 \
  --noise_placement noisy_first
run smoke_copy_order_noise run_softmax_copy \
  --ordering easy2hard --noise_mode random_pairs --noise_p 0.2 --noise_placement clean_first
# Curriculum vs. inference: train random, evaluate hard-to-easy (clean).
run smoke_concat_eval_order run_concat_inputs_targets \
  --ordering random --train_ordering auto --eval_ordering hard2easy
# Inference-only noise: train clean, evaluate with label noise (mixed placement).
run smoke_copy_eval_noise run_softmax_copy \
  --noise_mode clean --eval_noise_mode label_noise --eval_noise_p 0.25 --eval_noise_sigma 0.5 \
  --eval_noise_placement mixed

# Every expected artifact (named by src/rundir.py, the one module that knows file names).
echo "== checking artifacts"
"$PYTHON" -m src.rundir --figs "$DIR"/smoke_concat_order_noise "$DIR"/smoke_copy_order_noise \
  "$DIR"/smoke_concat_eval_order "$DIR"/smoke_copy_eval_noise \
  || fail "artifacts missing (listed above)"

# A bad flag must be refused up front with exit code 2 and one line.
set +e
"$PYTHON" -m runners.run_concat_inputs_targets --out "$DIR/smoke_bad" --noise_p 1.5 2>/dev/null
code=$?
set -e
[ "$code" -eq 2 ] || fail "--noise_p 1.5 should exit with code 2, got $code"
[ ! -e "$DIR/smoke_bad" ] || fail "a refused run created $DIR/smoke_bad"

echo "SMOKE OK: 4 runs in $DIR/smoke_* have every expected artifact"
