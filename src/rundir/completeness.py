"""What a run directory holds and lacks (sweeps and studies resume from this): whether training
finished, the outputs a finished, analysed run has, which are missing and which do not load.
RunCompleteness is a part of RunDir (src/rundir/run.py), whose checked reads it uses."""

from __future__ import annotations

from src.checkpoint import state_arrays
from src.params import first_non_finite
from src.rundir.names import (
    ALIGNMENT,
    ANALYSIS,
    ATTENTION_STATS,
    ATTENTION_STATS_PNG,
    ATTN_RAW,
    CHECKPOINT,
    CONFIG,
    METADATA,
    METRICS,
    NOISE_MASK,
    OOD,
    ORDERING,
    PARAMS,
    SUMMARY,
    attention_file,
)
from src.rundir.staging import CorruptArtifact, RunDirError


class RunCompleteness:
    """RunDir's completeness checks (mixed into RunDir: they read through its exists, load_json,
    load_config, load_arrays, read_metrics and corrupt)."""

    def listed_outputs(self) -> list[str] | None:
        """The outputs a finished run lists in its summary ("outputs"), or None (unfinished runs, and
        runs made before summaries listed them, whose outputs are fixed in expected_outputs)."""
        try:
            listed = self.load_json(SUMMARY).get("outputs") if self.exists(SUMMARY) else None
        except (RunDirError, ValueError, OSError, AttributeError):
            return None
        return [str(n) for n in listed] if isinstance(listed, list) else None

    def system(self) -> str | None:
        """The system config.json names (src/systems/), or None where it names none or is unreadable."""
        try:
            from src.systems import system_name

            name = system_name(self.load_config()["settings"])
        except (RunDirError, ValueError, OSError):
            return None
        return name if isinstance(name, str) else None

    def is_trained(self) -> bool:
        """Training finished and its outputs are in place."""
        required = [CONFIG, SUMMARY, PARAMS, METRICS] + (
            [] if self.listed_outputs() is not None else [ORDERING, NOISE_MASK]
        )
        if not all(self.exists(n) for n in required):
            return False
        try:
            return self.load_json(SUMMARY).get("status") == "complete"
        except (ValueError, OSError):
            return False

    def attention_saved(self) -> bool:
        """Whether the run was trained with --save_attention (per its metadata)."""
        try:
            return bool(self.load_json(METADATA).get("attention_saved"))
        except (RunDirError, ValueError, OSError):
            return False

    def expected_outputs(self, with_attention: bool | None = None) -> list[str]:
        """Every file a finished, analysed run has. `with_attention=None` asks the run itself."""
        listed = self.listed_outputs()
        if listed is not None:
            return listed
        if not self.exists(SUMMARY) and self.system() is not None:  # unfinished: the rest is listed at the end
            return [CONFIG, METRICS, SUMMARY, PARAMS]
        if with_attention is None:
            with_attention = self.attention_saved()
        expected = [
            CONFIG,
            METRICS,
            SUMMARY,
            PARAMS,
            ORDERING,
            NOISE_MASK,
            f"{ANALYSIS}/{ORDERING}",
            f"{ANALYSIS}/{NOISE_MASK}",
            METADATA,
            ALIGNMENT,
            OOD,
        ]
        if with_attention:
            expected += [ATTN_RAW, attention_file(0, 0), ATTENTION_STATS, ATTENTION_STATS_PNG]
        return expected

    def missing_outputs(self, with_attention: bool | None = None) -> list[str]:
        return [n for n in self.expected_outputs(with_attention) if not self.exists(n)]

    def is_diverged(self) -> bool:
        """Training stopped on a non-finite loss (final: retraining the same settings repeats it)."""
        try:
            return self.exists(SUMMARY) and self.load_json(SUMMARY).get("status") == "diverged"
        except (ValueError, OSError):
            return False

    def corrupt_files(self) -> list[CorruptArtifact]:
        """Every present JSON / NumPy output of the run that does not load as this code wrote it."""
        problems = []
        for name in [CONFIG] + [n for n in self.expected_outputs() if n != CONFIG]:
            if not self.exists(name):
                continue
            try:
                if name == CONFIG:
                    self.load_config()
                elif name.endswith(".json"):
                    self.load_json(name)
                elif name.endswith((".npz", ".npy")):
                    arrays = self.load_arrays(name)
                    if name in (PARAMS, CHECKPOINT):
                        bad = first_non_finite(arrays if name == PARAMS else state_arrays(arrays))
                        if bad is not None:
                            raise self.corrupt(
                                name, f"its array {bad!r} is not finite (a run keeps only finite parameters)"
                            )
                elif name == METRICS:
                    self.read_metrics()
            except CorruptArtifact as err:
                problems.append(err)
            except (ValueError, OSError) as err:
                problems.append(self.corrupt(name, str(err).splitlines()[0][:100] if str(err) else "unreadable"))
        return problems

    def is_complete(self, with_attention: bool | None = None) -> bool:
        """Trained, and every analysis output is present (attention ones when it was saved,
        or when `with_attention` asks for them)."""
        return self.is_trained() and not self.missing_outputs(with_attention)
