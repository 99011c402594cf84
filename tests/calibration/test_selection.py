from __future__ import annotations

import pandas as pd
import pytest

from specsim.calibration.fit import calibrate
from specsim.calibration.selection import parse_holdout
from specsim.errors import SpecsimError
from tests.calibration._synthetic import gemm_rows


def test_holdout_selection() -> None:
    df = pd.DataFrame({"model": ["a", "b", "c", "a"], "tp": [1, 2, 2, 8]})
    assert parse_holdout("model=a", df).tolist() == [True, False, False, True]
    assert parse_holdout("model!=a", df).tolist() == [False, True, True, False]
    assert parse_holdout("model=b,c", df).tolist() == [False, True, True, False]
    assert parse_holdout("tp=2", df).tolist() == [False, True, True, False]
    with pytest.raises(SpecsimError, match="no column 'gpu'"):
        parse_holdout("gpu=x", df)
    with pytest.raises(SpecsimError, match="no row has model"):
        parse_holdout("model=z", df)
    with pytest.raises(SpecsimError, match="COLUMN=VALUE"):
        parse_holdout("model", df)


def test_fits_never_silently_mix_kernels(truth) -> None:
    df = gemm_rows(truth, noise=0.0)
    df["framework"], df["kernel"] = "vllm", "torch.nn.functional.linear"
    other = df.iloc[:40].assign(framework="sglang", kernel="sglang_torch_linear")
    both = pd.concat([df, other], ignore_index=True)
    with pytest.raises(SpecsimError, match=r"the rows mix kernels \(gemm bf16: sglang/sglang_torch_linear, "
                                           r"vllm/torch.nn.functional.linear\)"):
        calibrate(both, truth, params="memory")
    assert len(calibrate(both, truth, params="memory", framework="vllm").rows) == len(df)
    assert len(calibrate(both, truth, params="memory", kernel="sglang_").rows) == 40
    assert len(calibrate(both, truth, params="memory", mix_kernels=True).rows) == len(both)
    with pytest.raises(SpecsimError, match="--framework: no row has framework 'trtllm'"):
        calibrate(both, truth, params="memory", framework="trtllm")


def test_noisy_rows_are_dropped_and_other_devices_skipped(truth) -> None:
    df = gemm_rows(truth, noise=0.0)
    df["std_ms"] = 0.01 * df["time_ms"]
    df.loc[0, "std_ms"] = 3 * df.loc[0, "time_ms"]  # a launch race, not a kernel time
    other = df.iloc[:5].assign(device="a100-sxm-80gb")
    result = calibrate(pd.concat([df, other], ignore_index=True), truth, params="memory")
    assert result.dropped_noisy == 1 and result.skipped == {"other devices": 5}
    assert len(result.rows) == len(df) - 1
