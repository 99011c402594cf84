"""What the tool knows: `specsim hardware list|show`, `specsim models list|show`.

Kept apart from the pricing commands so that a listing starts without pandas or the planner.
"""

from __future__ import annotations

from typing import Any

import typer

from specsim.cli._format import console, emit_mapping, emit_records
from specsim.cli._options import Fmt
from specsim.cli.main import app
from specsim.cost import hardware as hwmod

hardware_app = typer.Typer(help="Hardware profiles: list and show.", no_args_is_help=True)
models_app = typer.Typer(help="Model catalogue: list and show.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")


@hardware_app.command("list")
def hardware_list(fmt: Fmt = "table") -> None:
    """The bundled hardware profiles."""
    rows = []
    for name in hwmod.available():
        hw = hwmod.load_hardware(name)
        fp8 = hw.peak_flops_per_s["fp8"]
        rows.append({"name": name, "description": hw.description, "bf16_tflops": hw.peak("bf16") / 1e12,
                     "fp8_tflops": fp8 / 1e12 if fp8 else None, "mem_bw_tb_s": hw.mem_bw_bytes_per_s / 1e12,
                     "memory_gb": hw.memory_bytes / 1e9, "sms": hw.sm_count})
    if fmt != "table":
        emit_records(rows, fmt, "hardware profiles (dense peaks)")
        return
    # the terminal: short headers with units; the description wraps under its own header
    view = [{"name": r["name"], "bf16 TF/s": r["bf16_tflops"], "fp8 TF/s": r["fp8_tflops"],
             "HBM TB/s": r["mem_bw_tb_s"], "GB": r["memory_gb"], "SMs": r["sms"], "description": r["description"]}
            for r in rows]
    emit_records(view, "table", "hardware profiles (dense peaks; specsim hardware show NAME for the rest)")


@hardware_app.command("show")
def hardware_show(name: str, fmt: Fmt = "table") -> None:
    """One profile (a bundled name or a YAML path), with derived ridge points."""
    hw = hwmod.load_hardware(name)
    data = hw.to_yaml_dict()
    flat: dict[str, object] = {}
    for key, value in data.items():
        if key == "frameworks" and isinstance(value, dict):  # each engine's own kernels: one row per parameter
            for fw, block in value.items():
                flat.update({f"frameworks.{fw}.{k}": v for k, v in block.get("efficiency", {}).items()})
                flat.update({f"frameworks.{fw}.{k}": v for k, v in block.items() if k != "efficiency"})
        elif isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    eff = hw.efficiency
    flat["ridge_flops_per_byte.bf16"] = hw.peak("bf16") * eff.gemm_compute / (hw.mem_bw_bytes_per_s * eff.memory)
    flat["source_path"] = hw.source_path
    emit_mapping(flat, fmt, f"hardware: {hw.name}")


def _hf_ids() -> dict[str, list[str]]:
    """Catalogue name -> the Hugging Face ids that `-m` and a scenario's `model:` accept for it, as written
    in models/aliases.yaml."""
    from specsim.cost import model as modelmod
    from specsim.files import read_mapping

    out: dict[str, list[str]] = {}
    for hf_id, name in read_mapping(modelmod.catalogue_dir() / "aliases.yaml").items():
        out.setdefault(str(name).lower(), []).append(str(hf_id))
    return out


@models_app.command("list")
def models_list(fmt: Fmt = "table") -> None:
    """The bundled model catalogue, with the Hugging Face ids each name answers to."""
    from specsim.cost import model as modelmod

    ids = _hf_ids()
    rows: list[dict[str, Any]] = []
    for name in modelmod.available():
        m = modelmod.load_model(name)
        rows.append({"name": name, "family": m.family, "params_b": m.n_params() / 1e9,
                     "active_params_b": m.n_active_params() / 1e9, "layers": m.n_layers, "hidden": m.hidden,
                     "heads": m.n_heads, "kv_heads": m.n_kv_heads, "experts": m.n_experts,
                     "kv_kib_per_token": m.kv_bytes_per_token() / 1024, "hf_ids": ids.get(name, [])})
    if fmt != "table":
        if fmt in ("csv", "markdown"):
            rows = [{**r, "hf_ids": " ".join(r["hf_ids"])} for r in rows]
        emit_records(rows, fmt, "model catalogue")
        return
    view = [{"name": r["name"], "params B": round(r["params_b"], 2), "active B": round(r["active_params_b"], 2),
             "layers": r["layers"], "heads/kv": f"{r['heads']}/{r['kv_heads']}",
             "KV KiB/tok": round(r["kv_kib_per_token"], 1)} for r in rows]
    emit_records(view, "table", "model catalogue (specsim models show NAME for the rest)")
    con = console()
    con.print("Hugging Face ids (-m ID, or model: ID in a scenario):", markup=False)
    for r in rows:
        for hf_id in r["hf_ids"]:
            con.print(f"  {hf_id} -> {r['name']}", markup=False)


@models_app.command("show")
def models_show(name: str, fmt: Fmt = "table") -> None:
    """One model: architecture, parameters, bytes per dtype, KV bytes per token."""
    from dataclasses import asdict

    from specsim.cost import model as modelmod
    from specsim.cost.dtypes import weight_bytes

    m = modelmod.load_model(name)

    data: dict[str, object] = asdict(m)
    data["params"] = m.n_params()
    data["active_params"] = m.n_active_params()
    for part, n in m.param_counts().items():
        data[f"params.{part}"] = n
    for dtype in ("bf16", "fp8", "int4"):
        data[f"weight_gb.{dtype}"] = m.n_params() * weight_bytes(dtype) / 1e9
    for dtype in ("bf16", "fp8"):
        data[f"kv_bytes_per_token.{dtype}"] = m.kv_bytes_per_token(dtype)
    emit_mapping(data, fmt, f"model: {m.name}")
