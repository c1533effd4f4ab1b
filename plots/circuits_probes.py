"""The circuits study's probe verdicts (plots/circuits_report.py writes them): Akyürek et al.'s
claim that w_OLS is decodable from a trained GPT-2's residual stream (the best layer's held-out
ridge R² at least PROBE_HOLDS) far above both controls (at most CONTROL_AT_MOST), per read."""

from __future__ import annotations

from src import rundir as names

PROBE_HOLDS, CONTROL_AT_MOST = 0.9, 0.2

# a read of the GPT-2's stream (HIDDEN_READS) -> (its record's key in the study's data, its figure in the run)
PROBE_READS = {
    "query": ("probes", names.PROBES_PNG),
    "last_y": ("probes_last_y", names.PROBES_LAST_Y_PNG),
    "y_mean": ("probes_y_mean", names.PROBES_Y_MEAN_PNG),
}


def probe_records(data: dict) -> dict:
    """{read: analysis.probes' record or None}, in PROBE_READS' order."""
    return {read: data.get(key) for read, (key, _) in PROBE_READS.items()}


def probe_check(record: dict) -> dict:
    """One read's verdict: the trained model's best ridge R² for w_OLS against both controls'."""
    best = record["best"]
    trained = best["trained"]["w_ols"]["r2"]
    controls = {k: best[k]["w_ols"]["r2"] for k in ("untrained", "fixed_w") if k in best}
    mlp = record["probes"]["trained"]["mlp"].get("w_ols")
    return {
        "w_ols_ridge": trained,
        "w_ols_layer": best["trained"]["w_ols"]["layer"],
        "w_ols_mlp": max(mlp) if mlp else None,
        "controls": controls,
        "holds": bool(trained >= PROBE_HOLDS and controls and max(controls.values()) <= CONTROL_AT_MOST),
    }


def probe_checks(records: dict) -> dict | None:
    """{read: check} for each read probed (the query's x token, the last y token, the mean over the y tokens), and
    at the top level the check of the read whose trained probe scored higher (`read` names it),
    its controls read the same way."""
    reads = {read: probe_check(record) for read, record in records.items() if record is not None}
    if not reads:
        return None
    read = max(reads, key=lambda r: reads[r]["w_ols_ridge"])
    return {**reads[read], "read": read, "reads": reads}
