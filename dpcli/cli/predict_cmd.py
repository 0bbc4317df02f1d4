"""``dpcli predict``: apply a released model to a data file (no budget spent)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpcli.cli.common import (
    DataArg,
    JsonOpt,
    ProgressOpt,
    QuietOpt,
    ReportOpt,
    VerboseOpt,
    handle_errors,
)
from dpcli.cli.ui import UI


@handle_errors
def predict(
    model: Annotated[Path, typer.Argument(
        metavar="MODEL", help="A dpcli model JSON, or a publish-grid folder (its grid.json).")],
    data: DataArg,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Predictions (.parquet or .csv): the input columns plus "
        "prediction, score (binary labels) and proba_<class>. An existing file is "
        "replaced only when it is an earlier predict output (Parquet: marked in its "
        "metadata; CSV: its header ends with these columns); anything else exits 64.")],
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    progress: ProgressOpt = False,
    report: ReportOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Predict with a dpcli model; spends no budget.

    The model is already a private release, so applying it costs nothing.
    Per-row predictions on private rows are the custodian's, not a release:
    do not publish them as if they were private. The file need not hold the
    label; the schema travels inside the model, so no spec is needed.

    Example:

        dpcli predict models/nb.json sample_data/adult_test.parquet --out preds.parquet
    """
    from dpcli import protect, signals
    from dpcli.io import Outputs
    from dpcli.mechanisms import make_rng
    from dpcli.predict import OUTPUT_FORMATS, is_prediction_header, load_model, write_predictions

    ui = UI(quiet=quiet, json=json, force_progress=progress, report=report)
    m, env = load_model(model)
    outputs = Outputs()
    outputs.check_writable(out, protected=[*protect.model_inputs(model, m),
                                           *protect.inputs("the input data", data)])
    fmt = OUTPUT_FORMATS.get(out.suffix.lower())
    if fmt is not None:  # an unknown suffix is refused by write_predictions, before writing
        protect.check_own_output(out, "predict", fmt, is_prediction_header)
    with outputs:
        tmp = outputs.stage(out, private=True)  # rows of the input: the custodian's only
        with ui.progress("predicting", None) as advance:
            rows = write_predictions(m, data, out, tmp, rng=make_rng(), progress=advance)
        outputs.commit()
    signals.deliver()  # a signal held while the file was renamed into place
    from dpcli.io import envelope_cautions

    cautions = envelope_cautions(env)
    for caution in cautions:  # the training run's warning travels with the model
        ui.warn(f"{model}: {caution}")
    ui.say(f"wrote {rows:,} predictions to {out} with {env['kind']} model {model} "
           f"(trained at ε={env['epsilon']:g}); no budget spent")
    if json:
        ui.emit_json({"command": "predict", "model": str(model), "rows": rows,
                      "cautions": cautions,
                      "out": str(out), "spent": {"epsilon": 0.0, "delta": 0.0}})
