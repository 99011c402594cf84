from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specsim.cost.hardware import available, load_hardware
from specsim.errors import SpecsimError

REQUIRED = {"h100-sxm", "h100-pcie", "h200", "a100-sxm-80gb", "a100-sxm-40gb", "b200", "l40s", "mi300x"}


def test_all_required_profiles_load() -> None:
    assert set(available()) >= REQUIRED
    for name in available():
        hw = load_hardware(name)
        assert hw.name == name
        assert 0 < hw.efficiency.gemm_compute <= 1 and 0 < hw.efficiency.memory <= 1


def test_dense_not_sparse_peaks() -> None:
    # hardware.md: H100 SXM dense bf16 989 (1,979 is with sparsity); B200 dense fp8 4,500 (9,000 sparse).
    assert load_hardware("h100-sxm").peak("bf16") == pytest.approx(989e12)
    assert load_hardware("b200").peak("fp8") == pytest.approx(4500e12)
    assert load_hardware("mi300x").peak("bf16") == pytest.approx(1307.4e12)
    # fp8 is twice bf16 on every part that has it (dense-to-dense), never four times.
    for name in available():
        hw = load_hardware(name)
        if hw.peak_flops_per_s["fp8"]:
            assert hw.peak("fp8") == pytest.approx(2 * hw.peak("bf16"), rel=0.02)


def test_a100_has_no_fp8() -> None:
    with pytest.raises(SpecsimError, match="no fp8"):
        load_hardware("a100-sxm-80gb").peak("fp8")


def test_every_figure_has_a_source_comment() -> None:
    from specsim.cost.hardware import profiles_dir

    for path in profiles_dir().glob("*.yaml"):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            figure = value.split("#")[0].strip().replace(".", "", 1).isdigit()  # not `fp8: <dispatch table>`
            if key.strip() in {"sm_count", "memory_gb", "mem_bw_tb_per_s", "bf16", "fp8", "allreduce_busbw_gb_per_s"} \
                    and figure:
                assert "#" in line, f"{path.name}: {line!r} has no source"


def test_unknown_name_names_the_nearest_or_lists_known() -> None:
    with pytest.raises(SpecsimError, match=r"^unknown hardware 'h300' \(did you mean h800, h200, b300\?\)$"):
        load_hardware("h300")
    with pytest.raises(SpecsimError, match=r"^unknown hardware 'qqq' \(known: a100-pcie-80gb, .*h100-sxm.*; or a path"):
        load_hardware("qqq")
    assert load_hardware("H100_SXM").name == load_hardware("h100-sxm").name


def test_user_yaml_by_path_and_field_errors(tmp_path: Path) -> None:
    from specsim.cost.hardware import profiles_dir

    data = yaml.safe_load((profiles_dir() / "h100-sxm.yaml").read_text())
    data["name"] = "mine"
    good = tmp_path / "mine.yaml"
    good.write_text(yaml.safe_dump(data))
    assert load_hardware(str(good)).name == "mine"
    del data["mem_bw_tb_per_s"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecsimError, match=r"bad.yaml: missing field 'mem_bw_tb_per_s'"):
        load_hardware(str(bad))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(SpecsimError, match=r"broken.yaml line 2 column 1: not valid YAML"):
        load_hardware(str(broken))
    data["mem_bw_tb_per_s"] = -1
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecsimError, match=r"'mem_bw_tb_per_s' must be (a finite number )?> 0"):
        load_hardware(str(bad))


def test_moe_kernel_field(tmp_path: Path) -> None:
    """moe_kernel: "grouped" unless a profile names SGLang's Triton kernel; moe_tuned_configs lists the tuned
    config files (E and N read from the SGLang file name; quantised configs name a dtype and are not 16-bit
    shapes); both survive a round trip through the YAML a fit writes."""
    from specsim.calibration.writing import write_profile
    from specsim.cost.hardware import profiles_dir

    assert load_hardware("h100-sxm").moe_kernel == "grouped" and not load_hardware("h100-sxm").moe_tuned_configs
    a100 = load_hardware("a100-sxm-80gb")
    assert a100.moe_kernel == "triton_sglang"
    assert a100.moe_tuned_shapes == {(8.0, float(n)) for n in (1792, 2048, 3584, 4096, 7168)}
    out = tmp_path / "a100.yaml"
    write_profile(a100, out)
    back = load_hardware(str(out))
    assert back.moe_kernel == a100.moe_kernel and back.moe_tuned_configs == a100.moe_tuned_configs
    assert back.efficiency.moe_memory == pytest.approx(a100.efficiency.moe_memory)
    data = yaml.safe_load((profiles_dir() / "a100-sxm-80gb.yaml").read_text())
    data["moe_tuned_configs"] = ["E=8,N=14336,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a16.json"]
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(data))
    assert load_hardware(str(mine)).moe_tuned_shapes == frozenset()  # int8 weights: not a bf16 shape
    for key, value, match in (("moe_kernel", "cutlass", "moe_kernel must be one of"),
                              ("moe_tuned_configs", ["mixtral.json"], "not a fused-MoE config file name")):
        bad = dict(data, **{key: value})
        mine.write_text(yaml.safe_dump(bad))
        with pytest.raises(SpecsimError, match=match):
            load_hardware(str(mine))
    data = yaml.safe_load((profiles_dir() / "h100-sxm.yaml").read_text())
    data["moe_tuned_configs"] = ["E=8,N=3584,device_name=NVIDIA_H100_80GB_HBM3.json"]
    mine.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecsimError, match="needs moe_kernel: triton_sglang"):
        load_hardware(str(mine))


def test_moe_kernel_trtllm_gen(tmp_path: Path) -> None:
    """B300 and GB200 run FlashInfer's TRT-LLM-gen bf16 MoE (NVIDIA's tables: vLLM's flashinfer_trtllm
    bf16 experts): moe_kernel trtllm_gen, with its weight-stream rate moe_memory, survives the YAML a fit
    writes; it takes no tuned-config list (that is SGLang's Triton kernel's)."""
    from specsim.calibration.writing import write_profile
    from specsim.cost.hardware import profiles_dir

    for name in ("b300", "gb200"):
        hw = load_hardware(name)
        assert hw.moe_kernel == "trtllm_gen" and not hw.moe_tuned_configs
        out = tmp_path / f"{name}.yaml"
        write_profile(hw, out)
        back = load_hardware(str(out))
        assert back.moe_kernel == "trtllm_gen"
        assert back.efficiency.moe_memory == pytest.approx(hw.efficiency.moe_memory)
    data = yaml.safe_load((profiles_dir() / "b300.yaml").read_text())
    data["moe_tuned_configs"] = ["E=8,N=3584,device_name=NVIDIA_B300.json"]
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecsimError, match="needs moe_kernel: triton_sglang"):
        load_hardware(str(mine))
