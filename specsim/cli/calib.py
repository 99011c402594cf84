"""Commands about measurements: bench (time kernels), import (public data), calibrate (fit a profile)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from specsim.cli._format import check_format, emit, emit_mapping, emit_summary
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.files import Outputs, check_target

if TYPE_CHECKING:
    import pandas as pd

    from specsim.calibration.run import CalibrationRun
    from specsim.cost.hardware_profile import HardwareProfile

import_app = typer.Typer(help="Convert public profiling data to the measurement schema.", no_args_is_help=True)
app.add_typer(import_app, name="import")

Fmt = Annotated[str, typer.Option("--format", "-f", help="table | csv | json | markdown")]


@app.command()
def bench(
    device: Annotated[str, typer.Option("--device", help="cuda | cpu")],
    model: Annotated[str, typer.Option("--model", "-m", help="catalogue name or path to a config.json")],
    output: Annotated[Path, typer.Option("--output", "-o", help="measurement CSV to write (+ sidecar .json)")],
    tp: Annotated[int, typer.Option("--tp", help="tensor-parallel degree of the shapes")] = 1,
    dtype: Annotated[str, typer.Option("--compute-dtype", help="compute dtype: bf16 | fp16 | fp32")] = "bf16",
    quick: Annotated[bool, typer.Option("--quick", help="a few shapes and token counts (seconds)")] = False,
    ops: Annotated[str, typer.Option("--ops", help="comma list of gemm, attention, memcpy, peak, allreduce")] = (
        "gemm,attention,memcpy,peak,allreduce"),
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar on stderr")] = True,
    dtype_alias: Annotated[str | None, typer.Option("--dtype", hidden=True, help="old name of --compute-dtype")] = None,
    fmt: Fmt = "table",
) -> None:
    """Time the model's GEMMs, attention, memory copies, peak matmul (and all-reduce) with PyTorch.

    Writes the measurement schema to OUTPUT, a sidecar JSON of metadata (device, driver, CUDA and
    torch versions, dtype, date) and, on CPU, a base profile YAML for `calibrate`. Ctrl-C stops
    the sweep and keeps what was measured.
    """
    from specsim.calibration import bench as bench_mod
    from specsim.cost.model import load_model

    dtype = dtype_alias or dtype
    check_format(fmt)
    check_target(output)  # before minutes of timing
    spec = load_model(model)
    spec.check_tp(tp, "--tp")
    op_list = tuple(o.strip() for o in ops.split(",") if o.strip())
    result = bench_mod.run_bench(device, spec, tp, dtype, quick, op_list, progress)
    with Outputs() as outs:  # the CSV, its sidecar JSON (and profile) as one set
        paths = [output.parent / p.name for p in bench_mod.write_bench(result, outs.path(output), dtype)]
    summary = ", ".join(str(p) for p in paths)
    meta = result.meta
    extra = []
    if meta.peak_matmul_tflops is not None:
        extra.append(f"peak matmul {meta.peak_matmul_tflops:.3g} TFLOP/s")
    if meta.copy_bw_gb_per_s is not None:
        extra.append(f"copy {meta.copy_bw_gb_per_s:.3g} GB/s")
    emit_summary(fmt, f"wrote {summary}: {meta.rows} rows on {meta.device_name}"
                 + (f" ({'; '.join(extra)})" if extra else ""),
                 {"files": [str(p) for p in paths], "rows": meta.rows, "device": meta.device_name})
    if result.interrupted:
        print("interrupted: kept the rows measured so far", file=sys.stderr)
        raise typer.Exit(130)


@import_app.command("vidur")
def import_vidur_cmd(
    directory: Annotated[Path, typer.Argument(help="folder laid out as Vidur's data/profiling (compute/, network/)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="measurement CSV to write")],
    fmt: Fmt = "table",
) -> None:
    """Linear-layer timings (gemm rows) and single-node NCCL all-reduce timings (allreduce rows)."""
    from specsim.calibration.vidur import import_vidur

    with Outputs() as outs:
        staged = outs.path(output)  # checked (and its temporary folder made) before reading
        check_format(fmt)
        df = import_vidur(directory)
        staged.write_text(df.to_csv(index=False))
    counts = cast("Iterable[tuple[tuple[str, str], int]]", df.groupby(["device", "op"]).size().items())
    per = {f"{d} {o}": int(n) for (d, o), n in counts}
    emit_summary(fmt, f"wrote {output}: {len(df)} rows (" + ", ".join(f"{k}: {n}" for k, n in per.items()) + ")",
                 {"output": str(output), "rows": len(df), **per})


@import_app.command("aiconfigurator")
def import_aiconfigurator_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="measurement CSV to write")],
    system: Annotated[list[str] | None, typer.Option(
        "--system", help="aiconfigurator system (h100_sxm, b200_sxm, ...) or profile name; repeatable (default: all)")
    ] = None,
    framework: Annotated[list[str] | None, typer.Option(
        "--framework", help="sglang | vllm | trtllm | nccl; repeatable (default: all)")] = None,
    family: Annotated[list[str] | None, typer.Option(
        "--family", help="gemm | attention | moe | allreduce | mla (MLA decode); repeatable (default: the first four)")
    ] = None,
    all_versions: Annotated[bool, typer.Option(
        "--all-versions", help="keep every framework version (default: the newest that measured each shape)")] = False,
) -> None:
    """NVIDIA's measured kernel tables (aiconfigurator-core, pip install -e ".\\[tables]") in the measurement
    schema: GEMM (bf16, fp8, ...), decode and prefill attention, fused MoE, NCCL and custom all-reduce.

    Read from the installed package, never copied into this repository; each row names its framework,
    kernel and source file."""
    from specsim.cost.aiconfigurator import measurements, require_tables

    require_tables("import aiconfigurator")
    with Outputs() as outs:
        staged = outs.path(output)
        df = measurements(system or None, framework or None, family or None, latest=not all_versions)
        staged.write_text(df.to_csv(index=False))
    counts = cast("Iterable[tuple[tuple[str, str], int]]", df.groupby(["device", "op"]).size().items())
    print(f"wrote {output}: {len(df)} rows (" + ", ".join(f"{d} {o}: {n}" for (d, o), n in counts) + ")")


@app.command("calibrate-tables")
def calibrate_tables(
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="base profile: bundled name or YAML path")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="fitted profile YAML to write")] = None,
    framework: Annotated[str, typer.Option(
        "--framework", help="whose kernels: vllm | sglang | trtllm (a family it lacks comes from another)")] = "vllm",
    starts: Annotated[int, typer.Option("--starts", help="fits from this many starting points; best kept")] = 1,
    score_only: Annotated[bool, typer.Option(
        "--score-only", help="no fit: score the profile (its --framework kernels where it holds them) on the "
        "tables' held-out shapes")] = False,
    name: Annotated[str | None, typer.Option("--name", help="name of the fitted profile")] = None,
    family: Annotated[str, typer.Option(
        "--family", help="all | kernels (GEMM, attention, MoE, all-reduce) | alltoall (MoE dispatch+combine)")
    ] = "all",
    fmt: Fmt = "table",
) -> None:
    """Fit a profile to NVIDIA's measured kernel tables (aiconfigurator-core, pip install -e ".\\[tables]"):
    GEMMs, then attention, fused MoE and all-reduce per implementation, each stage on its own rows,
    with half the shapes held out; prints the error per family and band on the held-out shapes and
    writes the profile with its provenance (package version, framework, kernels). The MoE all-to-all
    (DeepEP dispatch + combine, modes ll and normal) is fitted to SGLang's DeepEP tables with every
    third token count held out (vLLM's and TensorRT-LLM's tables scored as a check)."""
    from specsim.calibration import tables as tab
    from specsim.calibration.writing import write_profile
    from specsim.cost.aiconfigurator import require_tables
    from specsim.cost.hardware import load_hardware

    check_format(fmt)
    require_tables("calibrate-tables")  # one line naming the extra, before anything is read
    if starts < 1:
        raise SpecsimError(f"--starts must be >= 1, got {starts}")
    if output is None and not score_only:
        raise SpecsimError("--output is needed unless --score-only")
    if output is not None:
        if output.suffix not in (".yaml", ".yml"):
            raise SpecsimError(f"--output must end in .yaml or .yml, got {output}")
        check_target(output)
    if family not in ("all", "kernels", "alltoall"):
        raise SpecsimError(f"--family must be all, kernels or alltoall, got {family!r}")
    base = load_hardware(hardware)
    fitted = base
    report = None
    if family != "alltoall":
        if score_only:
            # the framework's own kernels where the profile holds them (its `frameworks` block), else its own
            report = tab.score(base.for_framework(framework), tab.load_rows(base.name, framework))
        else:
            fitted, report, _ = tab.calibrate_to_tables(base, framework, starts)
    a2a = _alltoall_report(fitted, fit=not score_only) if family != "kernels" else None
    if a2a is not None:
        fitted, a2a_report = a2a
    if name and not score_only:
        import dataclasses

        fitted = dataclasses.replace(fitted, name=name)
    if output is not None:
        with Outputs() as outs:
            write_profile(fitted, outs.path(output))
    shown = None if report is None else report[(report["rows"] == "held-out") | (report["op"] == "allreduce")]
    if fmt != "table" and shown is not None and a2a is not None:
        import pandas as pd

        # one machine-readable table: the all-to-all rows under op "alltoall", their own columns beside
        emit(pd.concat([shown.drop(columns=["device"]), a2a_report.assign(op="alltoall")], ignore_index=True), fmt,
             f"{fitted.name} vs NVIDIA's tables: |error| (%)")
        return
    if shown is not None:
        emit(shown.drop(columns=["device", "framework"]), fmt,
             f"{fitted.name} on NVIDIA's {framework} tables: mean absolute error (%), held-out shapes")
    if a2a is not None:
        emit(a2a_report.rename(columns={"framework": "fw", "mape": "mean%", "median": "median%"}), fmt,
             f"{fitted.name} MoE all-to-all (DeepEP, vLLM, TRT-LLM) vs NVIDIA's tables: |error| (%)")
    if fmt == "table" and output is not None:
        print(f"wrote {output}")


def _alltoall_report(hw: HardwareProfile, fit: bool) -> tuple[HardwareProfile, pd.DataFrame] | None:
    """The profile (its all-to-all fitted when `fit`) and the all-to-all score on NVIDIA's tables;
    None (a note on stderr) for a GPU they do not cover."""
    from specsim.calibration.alltoall import alltoall_rows, fit_alltoall, score_alltoall

    try:
        rows = alltoall_rows(hw)
    except SpecsimError as exc:
        print(f"no MoE all-to-all tables for {hw.name}: {exc}", file=sys.stderr)
        return None
    if fit:
        hw = fit_alltoall(hw, rows)
    return hw, score_alltoall(hw, rows)


@app.command()
def calibrate(
    measurements: Annotated[Path, typer.Argument(help="measurement CSV (bench, import or your own)")],
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="base profile: bundled name or YAML path")],
    output: Annotated[Path, typer.Option("--output", "-o", help="fitted profile YAML to write")],
    holdout: Annotated[str | None, typer.Option(
        "--holdout", help="rows kept out of the fit and reported apart: COLUMN=V1,V2 or COLUMN!=V")] = None,
    params: Annotated[str | None, typer.Option(
        "--params", help="what to fit: 'a,b' exactly, '+a,b' defaults plus; 'allreduce' = its 3 parameters")] = None,
    ops: Annotated[str | None, typer.Option("--ops", help="use only these ops' rows (comma list)")] = None,
    by: Annotated[str | None, typer.Option("--by", help="also report errors per value of this column")] = None,
    max_rel_std: Annotated[float, typer.Option(
        "--max-rel-std", help="drop rows whose std_ms exceeds this fraction of time_ms (0 = keep all)")] = 1.0,
    name: Annotated[str | None, typer.Option("--name", help="name of the fitted profile")] = None,
    plots: Annotated[Path | None, typer.Option(
        "--plots", help="folder for the figures (default: beside OUTPUT)")] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="skip the figures")] = False,
    all_devices: Annotated[bool, typer.Option("--all-devices", help="use rows of every device")] = False,
    starts: Annotated[int, typer.Option("--starts", help="fits from this many starting points; best kept")] = 1,
    from_defaults: Annotated[bool, typer.Option(
        "--from-defaults", help="start from default efficiencies, not the base profile's (a fit from scratch: "
        "nothing the base was fitted on leaks into parameters left unfitted)")] = False,
    framework: Annotated[str | None, typer.Option(
        "--framework", help="use only rows of this framework (column `framework`)")] = None,
    kernel: Annotated[str | None, typer.Option(
        "--kernel", help="use only rows whose kernel name contains this")] = None,
    mix_kernels: Annotated[bool, typer.Option(
        "--mix-kernels", help="fit rows of several kernels for one op and dtype together (refused otherwise)")] = False,
    fmt: Fmt = "table",
) -> None:
    """Fit the profile's efficiency and overhead (and all-reduce) parameters to measured timings.

    Robust least squares on relative error; parameters the rows cannot determine are refused. Prints
    the error overall, per op and per token band on the fitted and the held-out rows, writes the
    profile YAML (with its provenance) that every other command accepts, and draws
    predicted-vs-measured and error-vs-size figures.
    """
    from specsim.calibration.run import CalibrationRequest, run_calibration

    check_format(fmt)
    run = run_calibration(CalibrationRequest(
        measurements, hardware, output, holdout=holdout, params=params,
        ops=tuple(o.strip() for o in ops.split(",") if o.strip()) if ops else None, by=by, max_rel_std=max_rel_std,
        name=name, plots=plots, no_plots=no_plots, all_devices=all_devices, starts=starts,
        from_defaults=from_defaults, framework=framework, kernel=kernel, mix_kernels=mix_kernels))
    _render_calibration(run, fmt, output, max_rel_std)


def _render_calibration(run: CalibrationRun, fmt: str, output: Path, max_rel_std: float) -> None:
    """The skipped rows (stderr), the error report, and for a table the fitted parameters and the files."""
    from specsim.calibration.params import fitted_values

    result, fitted = run.result, run.fitted
    notes = [f"{k}: {v} row(s)" for k, v in result.skipped.items()]
    if result.dropped_noisy:
        notes.append(f"{result.dropped_noisy} row(s) dropped with std_ms > {max_rel_std:g} x time_ms")
    if notes:
        print("skipped " + "; ".join(notes), file=sys.stderr)
    emit(result.report, fmt, f"calibration of {result.base.name}: mean absolute error (%)")
    values: dict[str, float | str] = {k: round(v, 4) for k, v in fitted_values(fitted).items()
                                      if k in result.params}
    ic = fitted.interconnect
    for impl, table in (({"nccl": ic.allreduce_by_world_size, **ic.allreduce_by_implementation}.items())
                        if result.allreduce else []):
        for n, (lat, bw, p) in table.items():
            tag = "" if impl == "nccl" else f"{impl} "
            values[f"allreduce[{tag}{n}]"] = f"latency {lat * 1e6:.1f} us, busbw {bw / 1e9:.0f} GB/s, sharpness {p:.2f}"
    if fmt == "table":
        emit_mapping(values, fmt, "fitted parameters")
        figs = run.figures
        print(f"wrote {output}" + (f" and {', '.join(str(f) for f in figs)}" if figs else ""))
