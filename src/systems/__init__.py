"""Systems: one registry entry per paper's training regime (registry "system").

An entry's options class is the system's Settings (src/settings.py: validation and bounds
included) and its builder turns validated settings into a `SystemTrainer`: the one loop's
Trainer (src/loop.py) plus what the pipeline (src/pipeline.py) asks of a system — the files it
writes, its summary and its one-line report. config.json records the system's name, so any run
reads back into its own Settings (`settings_from_record`) and reruns from that alone.

    lsa        von Oswald et al.: linear / softmax self-attention on in-context regression
    nonlinear  von Oswald et al.'s non-linear (sine) regression: an MLP block + LSA vs GD on
               learned features
    gpt2       Garg et al.'s GPT-2 on regression and boolean tasks (mechanisms, length study)
    lm         the Zoology / miniseq ICL benchmark's token and pair tasks (the recipe)
    dynamics   Zhang et al. 2025: training dynamics of linear attention on a fixed set

A new system is one file here (its Settings, its trainer, `register_system`) plus its test; a
trainer by gradient steps subclasses GradientTrainer and supplies its loss and what a step draws.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax

from src.loop import Chunk, LoopResult, Trainer, TrainState
from src.flags import UsageError
from src.registry import UnknownChoice, registry
from src.settings import Settings, SettingsError

SYSTEMS = registry("system")
# config.json of runs made before systems were registry entries: the name they recorded (or
# none: the paper's own runs) -> the system that reads them now
LEGACY_NAMES = {None: "lsa", "recipe": "lm", "linattn": "dynamics"}


class Arrays(dict):
    """An output written as one .npz of plain arrays (a plain dict is written as JSON)."""


class SystemTrainer(Trainer):
    """A Trainer with what the pipeline asks of a system. `settings` is the validated tree."""

    settings: Settings

    @property
    def label(self) -> str:
        """What the progress bar calls the run."""
        return self.settings.describe()

    def outputs_before(self) -> dict[str, Any]:
        """Files written before training starts (name -> dict | Arrays | array | bytes | str)."""
        return {}

    def params_arrays(self, result: LoopResult) -> dict:
        """params.npz: flat name -> array of the trained parameters."""
        raise NotImplementedError

    def outputs(self, result: LoopResult) -> dict[str, Any]:
        """Files written after training (besides params.npz and the summary)."""
        return {}

    def summary(self, result: LoopResult) -> dict:
        """metrics_summary.json's system-specific part (status, message and outputs are added)."""
        return {}

    def seed_parts(self):
        """For seeds trained together (src/together.py): (chunk, seed_input), where the pure chunk
        chunk(state, seed_input, first, num_steps) -> Chunk is the system's own, not jitted, and
        `seed_input` (e.g. the train key) is all that depends on the seed besides the initial
        state; None where the system does not offer it."""
        return None

    def report(self, result: LoopResult, run) -> str:
        """The one line a command prints when the run (RunDir `run`, analysed) is done."""
        return f"{result.step} {self.unit}s in {result.seconds:.1f}s"


class GradientTrainer(SystemTrainer):
    """A system trained by gradient steps through the one chunk (src.loop.gradient_chunk). The
    system sets `optimizer`, `seed_input` (what depends on the seed besides the initial state:
    the train key, and e.g. FAVOR+'s random features) and `initial_params()`, and builds its pure
    chunk with `make_chunk`; the state, the jitted chunk, its records and seeds trained together
    are this class's."""

    optimizer: Any
    seed_input: Any

    def initial_params(self):
        raise NotImplementedError

    def make_chunk(self):
        """The system's pure chunk: gradient_chunk(loss_fn, self.optimizer, draw)."""
        raise NotImplementedError

    @property
    def pure_chunk(self):
        if getattr(self, "_pure_chunk", None) is None:
            self._pure_chunk = self.make_chunk()
        return self._pure_chunk

    @property
    def jitted_chunk(self):
        """The pure chunk jitted, num_steps static (what run_chunk calls)."""
        if getattr(self, "_jitted_chunk", None) is None:
            self._jitted_chunk = jax.jit(self.pure_chunk, static_argnums=4)
        return self._jitted_chunk

    def init_state(self) -> TrainState:
        params = self.initial_params()
        return TrainState(params, self.optimizer.init(params))

    def run_chunk(self, state, first, num_steps) -> Chunk:
        params, opt_state, losses, records = self.jitted_chunk(
            state.params, state.opt_state, self.seed_input, first, num_steps
        )
        return Chunk(TrainState(params, opt_state), losses, records)

    def seed_parts(self):
        """Seeds trained together (src/together.py): the pure chunk, and this seed's `seed_input`."""

        def chunk(state, seed_input, first, num_steps) -> Chunk:
            params, opt_state, losses, records = self.pure_chunk(
                state.params, state.opt_state, seed_input, first, num_steps
            )
            return Chunk(TrainState(params, opt_state), losses, records)

        return chunk, self.seed_input


def register_system(settings_class: type, doc: str):
    """Decorator: register `build(settings) -> SystemTrainer` under `settings_class.system`."""
    return SYSTEMS.register(settings_class.system, settings_class, doc=doc)


def system_name(raw: Mapping) -> str:
    """The registered system a settings mapping (config.json's "settings") belongs to."""
    name = raw.get("system")
    return LEGACY_NAMES.get(name, name)


def settings_class(name: str) -> type:
    return SYSTEMS.get(name).options


def settings_from_record(raw: Any) -> Settings:
    """The validated Settings of a settings mapping of any system and schema (SettingsError)."""
    if not isinstance(raw, Mapping):
        raise SettingsError(f"settings={type(raw).__name__} is not accepted; accepted: a mapping")
    name = system_name(raw)
    try:
        cls = settings_class(name)
    except UnknownChoice:
        raise SettingsError(f"system={name!r} is unknown; accepted: {', '.join(SYSTEMS.names())}") from None
    return cls.from_dict(raw).validate()


def settings_from_file(raw: Any, source: str) -> Settings:
    """settings_from_record for a mapping read from a file: UsageError (one line) naming `source`
    (the flag and the file) for anything but a valid settings mapping of a registered system."""
    if not isinstance(raw, Mapping):
        raise UsageError(
            f"{source} holds no settings mapping (a JSON or YAML {type(raw).__name__}); accepted: "
            "a run's config.json `settings` (any key left out takes its default)"
        )
    try:
        return settings_from_record(raw)  # a v1 run's settings name no system: the paper's
    except SettingsError as err:
        raise UsageError(f"{source} is not a settings mapping of this workbench: {err}") from None


def build(settings: Settings) -> SystemTrainer:
    """The trainer of validated `settings` (its system's builder)."""
    return SYSTEMS.get(settings.system).build(settings)
