"""fit-runs: a deployment fitted to its runs recovers the step it was measured with, refuses what the runs cannot
identify, and every command prices with it. The runs here are simulated at a known calibration (the independent
route: the simulation that wrote them, at parameters the fit never sees), written as vLLM's client writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.advise.benchmark import BenchmarkFlags
from specsim.advise.fit_runs import Point, fit_deployment, simulate_points
from specsim.errors import SpecsimError
from specsim.scenario.deployment import Deployment
from specsim.step.evaluate import StepCalibration
from tests._cli import run

FLAGS = BenchmarkFlags(hardware="h100-sxm", model="llama-3.1-8b", drafts=("eagle3",), k=3, input_len=256,
                       output_len=64)
TRUE = StepCalibration(host_ms=0.8, pass_scale=1.2, verify_scale=0.85, spec_host_ms=0.5)
TAU = 2.6
LOADS = (1, 8, 64)


@pytest.fixture(scope="module")
def measured() -> list[Point]:
    """Both arms at three loads, simulated at TRUE with TAU tokens per step."""
    pts = [Point(arm, c, 256, 64, 1.0, 1.0, 4 * c) for arm in ("off", "on") for c in LOADS]
    sim = simulate_points(FLAGS, TRUE, TAU, pts)
    return [Point(p.arm, p.concurrency, 256, 64, float(s[0]), float(s[1]), p.num_prompts, f"{p.arm}{p.concurrency}")
            for p, s in zip(pts, sim, strict=True)]


@pytest.fixture(scope="module")
def counted(measured: list[Point]) -> Deployment:
    """Fitted on each arm's lowest and highest load, the acceptance counted."""
    return fit_deployment(FLAGS, [p for p in measured if p.concurrency in (1, 64)], tau_measured=TAU).deployment


def test_fit_recovers_the_step_it_was_measured_with(measured: list[Point], counted: Deployment) -> None:
    d = counted
    assert d.calibration.pass_scale == pytest.approx(TRUE.pass_scale, rel=0.03)
    assert d.calibration.host_ms == pytest.approx(TRUE.host_ms, abs=0.15)
    assert d.calibration.verify_scale == pytest.approx(TRUE.verify_scale, rel=0.08)
    assert d.calibration.spec_host_ms == pytest.approx(TRUE.spec_host_ms, abs=0.25)
    assert d.acceptance_source == "counters"
    # the load between, never fitted, predicted to within a percent of the simulation that wrote it
    mid = [p for p in measured if p.concurrency == 8]
    pred = simulate_points(FLAGS, d.calibration, TAU, mid)
    for p, (tok, tpot, _) in zip(mid, pred, strict=True):
        assert tok == pytest.approx(p.output_tok_s, rel=0.02)
        assert tpot == pytest.approx(p.tpot_mean_ms, rel=0.02)


def test_without_counters_the_acceptance_is_fitted(measured: list[Point]) -> None:
    ends = [p for p in measured if p.concurrency in (1, 64)]
    d = fit_deployment(FLAGS, ends).deployment
    assert d.acceptance_source == "fitted"
    # the speculative step's own costs are not read without counters: they trade against the acceptance
    assert (d.calibration.verify_scale, d.calibration.spec_host_ms) == (1.0, 0.0)
    tau = 1.0 + sum(__import__("numpy").cumprod(d.alphas[:FLAGS.k]))
    assert 1.5 < tau < FLAGS.k + 1  # a real acceptance, not a bound
    assert d.tokens_per_step() == pytest.approx(tau)


@pytest.mark.parametrize(("loads", "counters", "words"), [
    ({"off": (8,), "on": (1, 64)}, True, r"spec-off arm at one load \(concurrency 8\)"),
    ({"on": (1, 64)}, False, "without a spec-off arm the acceptance must be measured"),
    ({"on": (8,)}, True, "spec-on arm at one load"),
    ({}, False, "no runs given"),
])
def test_refuses_what_the_runs_cannot_identify(loads: dict[str, tuple[int, ...]], counters: bool,
                                               words: str) -> None:
    pts = [Point(arm, c, 256, 64, 100.0, 10.0) for arm, cs in loads.items() for c in cs]
    with pytest.raises(SpecsimError, match=words):
        fit_deployment(FLAGS, pts, tau_measured=TAU if counters else None)


def _vllm_json(path: Path, p: Point) -> Path:
    """A result in the keys `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py)."""
    n = p.num_prompts or 1
    duration = n * p.output_len / p.output_tok_s
    path.write_text(json.dumps({
        "date": "20261207-120000", "endpoint_type": "vllm", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
        "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": n, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": p.concurrency, "duration": duration, "completed": n, "failed": 0,
        "total_input_tokens": n * p.input_len, "total_output_tokens": n * p.output_len,
        "request_throughput": n / duration, "output_throughput": p.output_tok_s,
        "total_token_throughput": n * (p.input_len + p.output_len) / duration,
        "mean_ttft_ms": 20.0, "median_ttft_ms": 20.0, "mean_tpot_ms": p.tpot_mean_ms,
        "median_tpot_ms": p.tpot_mean_ms, "mean_itl_ms": p.tpot_mean_ms}))
    return path


def test_fit_runs_end_to_end(measured: list[Point], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {p.label: _vllm_json(tmp_path / f"{p.label}.json", p) for p in measured}
    dep = tmp_path / "deployment.yaml"
    code, out, err = run(capsys, "fit-runs", "-H", "h100-sxm", "-d", "eagle3", "-k", "3",
                         "--off", str(files["off1"]), "--off", str(files["off64"]),
                         "--on", str(files["on1"]), "--on", str(files["on64"]),
                         "--acceptance-length", str(TAU), "-o", str(dep))
    assert code == 0, err
    assert "decode passes" in out and dep.exists()
    # a terminal is 80 columns wide (but for the path the user chose)
    assert all(len(line) <= 80 or str(dep) in line for line in out.splitlines())
    # evaluate prices the deployment's own question, calibrated, and says so
    code, out, err = run(capsys, "evaluate", "--deployment", str(dep), "-b", "8", "-f", "json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["priced_calibration"].startswith("host +0.")
    assert answer["priced_model"] == "llama-3.1-8b"
    # simulate predicts the load that was not run, close to what the runs' simulation measured there
    code, out, err = run(capsys, "simulate", "--deployment", str(dep), "--concurrency", "8", "--requests", "32",
                         "-f", "json")
    assert code == 0, err
    on8 = next(p for p in measured if p.label == "on8")
    rows = json.loads(out)["rows"]
    spec = next(r for r in rows if r["draft"] != "none")
    assert spec["output_tok_s"] == pytest.approx(on8.output_tok_s, rel=0.03)
    # plan answers the question the runs asked, with no scenario file: closed-loop clients at the heaviest load
    code, out, err = run(capsys, "plan", "--deployment", str(dep), "-f", "json")
    assert code == 0, err
    assert json.loads(out)["buckets"][0]["batch"] == max(LOADS)
    assert any("calibrated" in n for n in json.loads(out)["notes"])
    # another deployment's question is refused in one line, naming both
    code, out, err = run(capsys, "evaluate", "--deployment", str(dep), "-H", "h200", "-b", "8")
    assert code == 2 and "another deployment" in err and len(err.strip().splitlines()) == 1


def test_the_acceptance_comes_from_the_counters_the_log_or_the_runs(tmp_path: Path) -> None:
    """Each source of the measured acceptance read to the figures it states: vLLM's /metrics scrape (per-position
    counters made conditional), its SpecDecoding log lines, the spec_decode_* fields a client saved."""
    from specsim.acceptance.metrics import load_metrics
    from specsim.calibration.runs import read_run, read_server_log
    from specsim.cli.deploy import _acceptance

    root = Path(__file__).resolve().parents[2] / "examples"
    scrape = root / "vllm_metrics.txt"
    rates, tau, source = _acceptance(scrape, None, None, [], 3, None)
    reading = load_metrics(scrape)
    assert tau == pytest.approx(reading.mean_length)
    assert 1 + sum(__import__("numpy").cumprod(rates)) == pytest.approx(reading.mean_length, rel=1e-6)
    log = root / "runs" / "vllm_server_eagle3_k2.log"
    rates, tau, _ = _acceptance(None, None, log, [], 2, None)
    assert tau == pytest.approx(read_server_log(log).acceptance_length) and len(rates) == 2
    runs = read_run(root / "runs" / "dsv4-flash-b300" / "mtp1_qps1.json")
    rates, tau, source = _acceptance(None, None, None, runs, 1, None)
    assert tau == pytest.approx(runs[0].acceptance_length) and rates[0] == pytest.approx(tau - 1, abs=0.01)
    assert source == "the spec-on runs' own record"
    with pytest.raises(SpecsimError, match="give one acceptance"):
        _acceptance(scrape, None, log, [], 3, None)


def test_runs_given_to_the_wrong_arm_or_of_two_models_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    runs = Path(__file__).resolve().parents[2] / "examples" / "runs"
    on = str(runs / "dsv4-flash-b300" / "mtp1_qps1.json")
    off = str(runs / "dsv4-flash-b300" / "off_qps8.json")
    code, _, err = run(capsys, "fit-runs", "-H", "b300", "-d", "mtp", "-k", "1", "--off", on, "--off", off)
    assert code == 2 and "its client recorded speculation on: give it with --on" in err
    other = str(runs / "vllm_bench_serve_opt125m_cpu_c2.json")
    code, _, err = run(capsys, "fit-runs", "-H", "b300", "-d", "mtp", "-k", "1", "--off", off, "--off", other)
    assert code == 2 and "2 models" in err and len(err.strip().splitlines()) == 1


def test_the_band_narrows_as_loads_are_added(measured: list[Point], counted: Deployment) -> None:
    """Runs the model prices exactly (simulated at TRUE): the band is the model's error between loads, which
    falls as the loads measured grow from two to three per arm."""
    three = fit_deployment(FLAGS, measured, tau_measured=TAU).deployment
    assert three.sigma_log < counted.sigma_log


def test_k_from_the_runs_own_counters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """vLLM's client saves one acceptance rate per drafted position: k is read from it, and a --k that
    disagrees is refused."""
    runs = Path(__file__).resolve().parents[2] / "examples" / "runs" / "dsv4-flash-b300"
    args = ["fit-runs", "-H", "b300", "-m", "deepseek-ai/DeepSeek-V4-Flash", "--tp", "8", "-d", "mtp",
            "--on", str(runs / "mtp1_qps1.json"), "--on", str(runs / "mtp1_qps8.json"), "-f", "json",
            "-o", str(tmp_path / "d.yaml")]
    code, _, err = run(capsys, *args, "-k", "3")
    assert code == 2 and "counted acceptance at [1] positions" in err
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert json.loads(out)["question"]["k"] == 1


def test_the_heaviest_load_by_littles_law() -> None:
    """A closed loop's clients; an open loop's rate x (TTFT + (output - 1) x TPOT), by hand: 4/s x (200 ms +
    511 x 20 ms) = 41.7 requests in flight."""
    from specsim.advise.fit_runs import heaviest_load
    from specsim.scenario.deployment import Deployment

    def dep(*rows: dict[str, object]) -> Deployment:
        return Deployment({"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "output_len": 512},
                          TRUE, residuals=tuple({"arm": "off", "output_tok_s": 1.0, "tpot_mean_ms": 20.0, **r}
                                                for r in rows))

    assert heaviest_load(dep({"concurrency": 8}, {"concurrency": 64})) == 64
    assert heaviest_load(dep({"rate_rps": 4.0, "ttft_mean_ms": 200.0})) == 42
    assert heaviest_load(dep()) == 1

