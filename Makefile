# Every target bootstraps .venv from requirements.txt on first use; the stamp
# file makes it reinstall whenever requirements.txt changes.
#
#   make demo                      a short run of every system, with the paths of its figures (runs/demo/)
#   make test                      the test suite, under 10 minutes on 2 cores (the slow tier: make test_slow;
#                                  the studies' end-to-end quick runs: make test_studies)
#   make golden                    every golden run of the four systems, bit for bit on a machine with its record
#   make golden_record             record this machine's golden runs (checked against the others first)
#   make eval_order STEPS=300      the order sweep at 300 steps (default: the paper's steps; OVERWRITE=1
#                                  retrains runs of another STEPS, as --overwrite does on any sweep or study)
#   make dynamics                  Zhang et al.'s study (training dynamics of linear attention)
#   make mechanisms                limits_of_icl's study (attention mechanisms on regression; long: see docs/mechanisms.md)
#   make linear_attention          why unnormalised linear attention does not learn there (sum vs mean, learning rate)
#   make lengthgen                 Lin et al.'s study (position encodings, length generalisation)
#   make lengthgen_laptop          its own alibi config at the laptop size, timed with its peak memory (docs quote it)
#   make mechanisms_sweep          the protocol sweep that chose the mechanisms study's training settings
#   make lengthgen_sweep           the protocol sweep of the length study's FIRE cell (budget against target)
#   make yarn_recency              dynamic YaRN's attention on the last 20 % of a long prompt, per layer and head (stronger models)
#   make markov                    Edelman et al.'s in-context Markov chains on their attention-only transformer (k = 2, 3)
#   make mad                       MAD's six token tasks on the zoo's 12 mixers ([mixer, SwiGLU] x 2, width 64)
#   make mad_settling              make mad's grid (reused) and attention's 2,400-step selective-copying run
#   make circuits                  induction heads, residual-stream probes and algorithm selection (report/CIRCUITS.md)
#   make robustness                the robustness battery (every mechanism x every evaluation shift)
#   make paper_scale STUDY=...     a study at its paper's own scale (configs/paper/; a GPU study), estimate first
#   make mixers                    Zoology's MQAR gap on the ICL benchmark (attention, linear attention, GLA; width 64, κ 4, 8, 16; seeds 0-2)
#   make clean                     remove runs, results_*.csv, generated figures, caches (keeps .venv)
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-stamp
RUN := $(PYTHON)
# Runs share a persistent XLA compilation cache (same programs, same results, much less
# compile time for short runs); sweeps keep theirs in <runs-dir>/.jax_cache.
JAX_CACHE ?= $(CURDIR)/runs/.jax_cache
RUNJ := JAX_COMPILATION_CACHE_DIR=$(JAX_CACHE) JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
	JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 $(RUN)

# Training length of the paper's two models in demo_concat / demo_copy (empty = the paper's: 5000
# concat, 10000 copy; twolayer learns its copy at ~4-5k steps).
CONCAT_STEPS ?=
COPY_STEPS ?=
# Sweeps (eval_order / eval_noise): steps (empty = the paper's), seeds, parallel runs
# (empty = one per CPU core).
STEPS ?=
ORDER_SEEDS ?= 0,1
NOISE_SEEDS ?= 0
JOBS ?=

steps_flag = $(if $(strip $(1)),--steps $(strip $(1)))
jobs_flag = $(if $(strip $(JOBS)),--jobs $(strip $(JOBS)))
# OVERWRITE=1: a sweep or study retrains the runs it finds made with other settings or code
# (e.g. after another STEPS) instead of refusing them
OVERWRITE ?=
overwrite_flag = $(if $(strip $(OVERWRITE)),--overwrite)

# `make gpu`: add the CUDA wheels to an existing .venv
.PHONY: help gpu venv test lint format test_slow test_studies golden golden_record demo demo_copy demo_concat smoke_train figs eval_order eval_noise clean bench reproduce reproduce_quick dynamics dynamics_quick mechanisms mechanisms_quick lengthgen lengthgen_quick lengthgen_laptop mixers mixers_quick zoo zoo_quick task_diversity task_diversity_quick task_diversity_finite matrix matrix_quick robustness robustness_quick paper_scale linear_attention originals compare_originals originals_beside_ours mechanisms_sweep lengthgen_sweep yarn_recency markov mad mad_settling circuits gpu_next gpu_wheels paper_scale_report paper_scale_all

# GPU=1: also the CUDA 12 jax wheels (requirements-gpu.txt); the code runs unchanged on a GPU.
GPU ?=
$(STAMP): requirements.txt pyproject.toml
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --disable-pip-version-check -q -r requirements.txt
	$(PYTHON) -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps -e .
	$(if $(strip $(GPU)),$(PYTHON) -m pip install --disable-pip-version-check -q -r requirements-gpu.txt)
	touch $(STAMP)

# make venv GPU=1 after a CPU install: the stamp is fresh, so install the CUDA wheels directly.
# `make help`: every target with its one-line description (the `##` text on its line), from this file
help:  ## every target, one line each (this list)
	@$(PY) scripts/make_help.py Makefile

gpu: $(STAMP)  ## the CUDA jax wheels into .venv (requirements-gpu.txt)
	$(PYTHON) -m pip install --disable-pip-version-check -q -r requirements-gpu.txt

venv: $(STAMP)  ## create .venv from requirements.txt (every target does this first)

# The suite's files spread over TEST_JOBS processes (pytest-xdist; a file's tests stay together, so
# its module fixtures are built once). TEST_JOBS=0: one process.
TEST_JOBS ?= 2
PYTEST = $(RUN) -m pytest -q $(if $(filter-out 0,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)
test: lint  ## ruff, then the test suite (2 processes; about 6 min on 2 cores)
	$(PYTEST) -m "not study and not slow" tests

# ruff over every Python file (pyproject.toml's [tool.ruff]): the layout, then the error checks
lint: $(STAMP)  ## ruff: the formatter's check, then the error checks (pyproject.toml's rules)
	$(RUN) -m ruff format --check --quiet .
	$(RUN) -m ruff check --quiet .

format: $(STAMP)  ## ruff format: lay out every Python file the one way (make lint checks it)
	$(RUN) -m ruff format --quiet .

# The slow tier (tests/slow_tests.py): end-to-end checks that train, kill and resume runs in
# subprocesses, sweeps, Ray, whole config trees, the golden runs of the gpt2 and lm systems.
# CI runs it after make test.
test_slow: $(STAMP)  ## the slow tier: runs killed and resumed, sweeps, Ray, golden gpt2/lm runs
	$(PYTEST) -m "slow and not study" tests

# The studies' --quick forms end to end (reproduce, dynamics, mechanisms + robustness, mixers,
# lengthgen): a few minutes more; CI runs them after make test.
test_studies: $(STAMP)  ## every study's --quick form end to end
	$(PYTEST) -m study tests

# Every golden run of every system (the suite checks one per system): bit for bit against the
# record of this machine's fingerprint, elsewhere to 1e-6 relative (tests/golden_machines.py)
golden: $(STAMP)  ## every golden run of every system against the recorded metrics
	$(RUN) tests/golden_systems.py --check

# This machine's golden record (tests/golden/machine-<id>.json), written only if no run moved beyond
# another machine's rounding against the records there; from then on the suite compares bit for bit
golden_record: $(STAMP)  ## record this machine's golden metrics (after checking them against the others)
	$(RUN) tests/golden_record.py

# The README's first command: a short run of every system (scripts/demo.py), one progress line per
# step and the path of every figure at the end, into runs/demo/ (the demo replaces its own runs).
demo: $(STAMP)  ## the README's first command: a short run of every system and its figures
	$(RUN) -m scripts.demo

demo_copy: $(STAMP)  ## von Oswald et al.'s softmax copy model, briefly, attention saved (runs/demo_copy)
	$(RUNJ) -m runners.run_softmax_copy --out runs/demo_copy --overwrite --save_attention \
	  $(call steps_flag,$(COPY_STEPS))

demo_concat: $(STAMP)  ## von Oswald et al.'s concatenated model, briefly, attention saved (runs/demo_concat)
	$(RUNJ) -m runners.run_concat_inputs_targets --out runs/demo_concat --overwrite --save_attention \
	  $(call steps_flag,$(CONCAT_STEPS))

smoke_train: $(STAMP)  ## the smoke script: one tiny run per runner
	PYTHON=$(PYTHON) JAX_COMPILATION_CACHE_DIR=$(JAX_CACHE) bash scripts/smoke.sh

figs: $(STAMP)  ## attention heat maps of runs/demo_concat (make demo_concat first)
	$(RUN) -m plots.attention_quick --run runs/demo_concat

eval_order: $(STAMP)  ## von Oswald et al.'s ordering sweep (eval_order) and its figures
	$(RUNJ) -m eval_order --models lsa1,twolayer --ordering random,smallnorm2largenorm \
	  --train_ordering auto --eval_ordering auto \
	  --seeds $(ORDER_SEEDS) $(call steps_flag,$(STEPS)) $(jobs_flag) \
	  --out results_order.csv --runs-dir runs/eval_order $(overwrite_flag)
	$(RUN) -m plots.fig_templates --from results_order.csv --out report/figures/order

eval_noise: $(STAMP)  ## von Oswald et al.'s noise sweep (eval_noise) and its figures
	$(RUNJ) -m eval_noise --models lsa1,twolayer --noise_mode label_noise,random_pairs \
	  --p 0.0,0.25 --sigma 0.5 --placement clean_first,noisy_first \
	  --train_noise_mode auto --eval_noise_mode auto \
	  --ordering random --seeds $(NOISE_SEEDS) $(call steps_flag,$(STEPS)) $(jobs_flag) \
	  --out results_noise.csv --runs-dir runs/eval_noise $(overwrite_flag)
	$(RUN) -m plots.fig_templates --from results_noise.csv --out report/figures/noise

# Training speed at batch 2048 (median ms/step, compile/eval time, FLOPs, floor) -> runs/bench/bench.json
bench: $(STAMP)  ## training-speed benchmarks of every system (make bench figures)
	$(RUN) -m scripts.bench.training
	$(RUN) -m scripts.bench.dynamics
	$(RUN) -m scripts.bench.mechanisms
	$(RUN) -m scripts.bench.recipe
	$(RUN) -m scripts.bench.paper_cell --gpu-only

reproduce: $(STAMP)  ## von Oswald et al.'s experiments: report/REPRODUCTION.md
	$(RUN) -m scripts.reproduce

reproduce_quick: $(STAMP)  ## the same at a smoke-test size (report/quick)
	$(RUN) -m scripts.reproduce --quick

# Training dynamics of linear attention (Zhang et al. ICML 2025): report/DYNAMICS.md, report/dynamics_results.json
dynamics: $(STAMP)  ## Zhang et al.'s training dynamics: report/DYNAMICS.md
	$(RUN) -m scripts.dynamics $(overwrite_flag)

dynamics_quick: $(STAMP)  ## the same at a smoke-test size
	$(RUN) -m scripts.dynamics --quick $(overwrite_flag)

# Attention mechanisms on in-context regression (limits_of_icl): report/MECHANISMS.md
mechanisms: $(STAMP)  ## limits_of_icl's attention mechanisms: report/MECHANISMS.md
	$(RUN) -m scripts.mechanisms $(overwrite_flag)

mechanisms_quick: $(STAMP)  ## the same at a smoke-test size
	$(RUN) -m scripts.mechanisms --quick $(overwrite_flag)

# The mechanisms study's linear attention, measured: sum vs mean over the context, two learning
# rates, the ICL benchmark's normalised linear attention: report/LINEAR_ATTENTION.md
linear_attention: $(STAMP)  ## the mechanisms study's linear attention, measured: report/LINEAR_ATTENTION.md
	$(RUN) -m scripts.linear_attention $(overwrite_flag)

# Position encodings and length generalisation (Lin et al. AAAI 2025): report/LENGTHGEN.md
lengthgen: $(STAMP)  ## position encodings and length generalisation: report/LENGTHGEN.md
	$(RUN) -m scripts.lengthgen $(overwrite_flag)

lengthgen_quick: $(STAMP)  ## the same at a smoke-test size
	$(RUN) -m scripts.lengthgen --quick $(overwrite_flag)

# The length study's own alibi config at the laptop size the docs give, and its eval.sh equivalent,
# each timed with its peak memory: report/measurements/lengthgen_laptop.json (about 25 min on 2 cores)
lengthgen_laptop: $(STAMP)  ## the length study's alibi config at laptop size, timed with its memory
	$(RUN) -m scripts.bench.laptop_lengthgen $(overwrite_flag)

# The protocol sweeps (scripts/protocol_sweep.py): each study's headline cell under the protocols in
# configs/sweeps/<study>/, 3 seeds: report/SWEEP_MECHANISMS.md, report/SWEEP_LENGTHGEN.md
mechanisms_sweep: $(STAMP)  ## the mechanisms study's protocol sweep: report/SWEEP_MECHANISMS.md
	$(RUN) -m scripts.protocol_sweep mechanisms $(overwrite_flag)

lengthgen_sweep: $(STAMP)  ## the length study's protocol sweep: report/SWEEP_LENGTHGEN.md
	$(RUN) -m scripts.protocol_sweep lengthgen $(overwrite_flag)

# Dynamic YaRN's recency on the length sweep's strongest protocol, per layer and head: report/YARN_RECENCY.md
yarn_recency: $(STAMP)  ## dynamic YaRN's recency per layer and head: report/YARN_RECENCY.md
	$(RUN) -m scripts.yarn_recency $(overwrite_flag)

# In-context Markov chains (Edelman et al. 2024, statistical induction heads): report/MARKOV.md
markov: $(STAMP)  ## in-context Markov chains on the paper's attention-only model: report/MARKOV.md
	$(RUN) -m scripts.markov $(overwrite_flag)

# MAD's token tasks (Poli et al. 2024) on every mixer of the zoo: report/MAD.md
mad: $(STAMP)  ## MAD's six token tasks on the zoo's 12 mixers: report/MAD.md
	$(RUN) -m scripts.mad $(overwrite_flag)

mad_settling: $(STAMP)  ## make mad's grid (reused) and attention's 2,400-step selective-copying run
	$(RUN) -m scripts.mad --settling $(overwrite_flag)

# How the model does it (Olsson et al., Akyürek et al., Bai et al.): report/CIRCUITS.md
circuits: $(STAMP)  ## induction heads, residual-stream probes and algorithm selection: report/CIRCUITS.md
	$(RUN) -m scripts.circuits --jobs 2 $(overwrite_flag)

# Sequence mixers on the ICL benchmark (Zoology / miniseq): report/MIXERS.md
# MIXERS_SEEDS: the study's training seeds (the shipped report: 0,1,2; MIXERS_SEEDS=0 for a third of it)
MIXERS_SEEDS ?= 0,1,2
mixers: $(STAMP)  ## sequence mixers on the ICL benchmark: report/MIXERS.md
	$(RUN) -m scripts.mixers --seeds $(MIXERS_SEEDS) $(overwrite_flag)

# the robustness battery over the mechanisms study's runs (reused when current; make mechanisms first
# to share them) and two training-time curricula: report/ROBUSTNESS.md
robustness: $(STAMP)  ## the robustness battery over the mechanisms runs: report/ROBUSTNESS.md
	$(RUN) -m scripts.robustness $(overwrite_flag)

robustness_quick: $(STAMP)  ## the same at a smoke-test size
	$(RUN) -m scripts.robustness --quick $(overwrite_flag)

mixers_quick: $(STAMP)  ## the mixers study at a smoke-test size
	$(RUN) -m scripts.mixers --quick $(overwrite_flag)

# Zoology's mixer zoo on MQAR (configs/zoo.yaml): attention, the gated convolutions and the
# small-state mixers, best of two learning rates per cell: report/ZOO.md
ZOO_SEEDS ?= 0
zoo: $(STAMP)  ## Zoology's mixer zoo on MQAR: report/ZOO.md
	$(RUN) -m scripts.zoo --seeds $(ZOO_SEEDS) $(overwrite_flag)

zoo_quick: $(STAMP)  ## the same at a smoke-test size
	$(RUN) -m scripts.zoo --quick $(overwrite_flag)

# Task diversity (Raventós et al. 2023; configs/task_diversity.yaml): pretraining pools of 2 .. 8,192
# task vectors and fresh tasks, 3 seeds, the model beside dMMSE and ridge (report/TASK_DIVERSITY.md)
task_diversity: $(STAMP)  ## Raventós et al.'s task diversity: report/TASK_DIVERSITY.md
	$(RUN) -m scripts.task_diversity $(overwrite_flag)

# The finite-size test (Raventós et al.'s criterion at our size): pools 32 .. 8,192 at 10x the study's steps, seed 0,
# a checkpoint kept every 5,000 steps: does the distance to ridge rise with training? (report/TASK_DIVERSITY_FINITE.md;
# about 3.5 h on 2 cores)
task_diversity_finite: $(STAMP)  ## its finite-size test at 10x the steps: report/TASK_DIVERSITY_FINITE.md
	$(RUN) -m scripts.task_diversity --finite-size $(overwrite_flag)

task_diversity_quick: $(STAMP)  ## the task-diversity study at a smoke-test size
	$(RUN) -m scripts.task_diversity --quick $(overwrite_flag)

# The matrix (configs/matrix.yaml): every registered sequence mixer on von Oswald et al.'s in-context
# linear regression, 3 seeds, each with the same analyses (loss vs one GD step, GD alignment, ICL
# curve, robustness, length) -> report/MATRIX.md and a heat-map
matrix: $(STAMP)  ## every mixer x every analysis on in-context regression: report/MATRIX.md
	$(RUN) -m scripts.matrix $(overwrite_flag)

matrix_quick: $(STAMP)  ## the same at a smoke-test size
	$(RUN) -m scripts.matrix --quick $(overwrite_flag)

# A study at its paper's own scale (configs/paper/<STUDY>.yaml) on whatever device JAX finds, after
# printing the time and memory it expects (refused, exit 2, when it cannot fit): STUDY = mechanisms,
# lengthgen or mixers; ONLY = a comma list of the study's rows; PAPER_FLAGS = --estimate (stop after
# the estimate), --tiny (a tiny model, seconds), --jobs N. Runs and report: runs/paper_scale/<STUDY>.
STUDY ?=
ONLY ?=
PAPER_FLAGS ?=
paper_scale: $(STAMP)  ## a study at its paper's own scale on the local device (STUDY=, ONLY=, PAPER_FLAGS=)
	$(RUN) -m scripts.paper_scale --study "$(STUDY)" $(if $(strip $(ONLY)),--only $(ONLY)) $(PAPER_FLAGS)

# The GPU queue (scripts/device/gpu_queue.py): prepared device jobs, one lent device command each.
# `make gpu_next` prints the next job not yet run and the exact device call (command, carry, timeout);
# `make gpu_wheels` fetches what that call carries for the device's Python 3.12 (dm-haiku, jmp);
# after the call, `python -m scripts.device.gpu_queue record JOB --from <files>` files what came back under
# report/measurements/gpu/JOB/, and `make paper_scale_report` rebuilds report/PAPER_SCALE.md.
# `make paper_scale_all` on a GPU of your own runs every job not recorded, records it, and reports.
gpu_next: $(STAMP)  ## the GPU queue's next job and its exact device call
	$(RUN) -m scripts.device.gpu_queue next

gpu_wheels:  ## download the wheels a device call carries (dm-haiku, jmp) into .whl
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux2014_x86_64 -d .whl dm-haiku==0.0.17 jmp==0.0.4

paper_scale_report: $(STAMP)  ## rebuild report/PAPER_SCALE.md from the recorded GPU jobs
	$(RUN) -m scripts.device.gpu_queue report

paper_scale_all: $(STAMP)  ## run every GPU queue job on a local GPU, record each, report
	$(RUN) -m scripts.device.gpu_queue all

# Our training step against the originals' own PyTorch code, side by side (scripts/bench/compare_originals.py):
# `make originals` builds the scratch environment .originals/ (its own venv with torch, the two
# repositories at the commits measured); `make compare_originals` times the mechanisms study's cell
# and the ICL benchmark's default cell, interleaved. Results: runs/compare_originals/*.json.
ORIGINALS ?= .originals
originals:  ## build .originals/: the originals' code and a torch venv
	python3 -m venv $(ORIGINALS)/venv
	$(ORIGINALS)/venv/bin/pip install torch==2.14.1 transformers==5.24.0 tyro==1.0.17 torchdata==0.11.0 \
	  flash-linear-attention==0.6.0 einops==0.8.2 rich==15.0.0 pyyaml==6.0.4 numpy==2.4.6
	test -d $(ORIGINALS)/limits_of_icl || git clone https://github.com/kenzhengjk/limits_of_icl $(ORIGINALS)/limits_of_icl
	git -C $(ORIGINALS)/limits_of_icl checkout -q 040e95d0ab840c9b0fe90f0bbf7c44a80d54456e
	test -d $(ORIGINALS)/miniseq || git clone https://github.com/mirceamironenco/miniseq $(ORIGINALS)/miniseq
	git -C $(ORIGINALS)/miniseq checkout -q d7fdca1f55a836c37427832c9da357c36c2e19a9

compare_originals: $(STAMP)  ## our training step beside the originals' own, interleaved
	$(RUN) -m scripts.bench.compare_originals --torch-python $(ORIGINALS)/venv/bin/python \
	  --limits-of-icl $(ORIGINALS)/limits_of_icl --miniseq $(ORIGINALS)/miniseq

# The original limits_of_icl code trained at the mechanisms study's cell and protocol (softmax_causal
# and FAVOR+, 3 seeds, 2 at a time), scored on the study's own eval prompts, beside our recorded
# numbers (scripts/originals_beside_ours.py; about 2 h on 2 cores, FAVOR+'s prefix sums dominate):
# report/measurements/originals_mechanisms.json.
originals_beside_ours: $(STAMP)  ## limits_of_icl's own training beside ours on the mechanisms cell, 3 seeds
	$(RUN) -m scripts.originals_beside_ours --torch-python $(ORIGINALS)/venv/bin/python \
	  --limits-of-icl $(ORIGINALS)/limits_of_icl

# Removes every run directory (runs/* but runs/.gitkeep), results_*.csv, generated figures
# (report/figures/**.png except the tracked report/figures/paper/ and dynamics/), and caches.
# Keeps .venv.
clean:  ## remove runs, results CSVs, generated figures and caches (keeps .venv)
	find runs -mindepth 1 -maxdepth 1 ! -name .gitkeep -exec rm -rf {} +
	rm -f results_*.csv
	find report/figures -name '*.png' ! -path 'report/figures/paper/*' ! -path 'report/figures/dynamics/*' ! -path 'report/figures/mechanisms/*' ! -path 'report/figures/lengthgen/*' ! -path 'report/figures/mixers/*' ! -path 'report/figures/robustness/*' ! -path 'report/figures/linear_attention/*' -delete
	find report/figures -mindepth 1 -type d -empty -delete
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +
	rm -rf .pytest_cache
