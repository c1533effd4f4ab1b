# Every target bootstraps .venv from requirements.txt on first use; the stamp
# file makes it reinstall whenever requirements.txt changes.
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-stamp
RUN := PYTHONPATH=. $(PYTHON)

.PHONY: venv test demo

$(STAMP): requirements.txt
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --disable-pip-version-check -q -r requirements.txt
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(RUN) -m pytest -q tests

demo: $(STAMP)
	$(RUN) -c "from src.config import preset; from src.train import train; r = train(preset('lsa1')); print('lsa1 eval_loss %.4f | one-step GD %.4f (eta %.2f) | align_cos %.4f' % (r.final['eval_loss'], r.final['gd_loss'], r.eval_set.gd_eta, r.final['align_cos']))"
