from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cli import run

DATA = Path(__file__).parents[1] / "data"

# seed chapter, worked example "Choosing k" (alpha 0.8, c 0.05)
SEED_TABLE = {
    1: (1.80, 1.71),
    2: (2.44, 2.22),
    3: (2.95, 2.57),
    4: (3.36, 2.80),
    5: (3.69, 2.95),
    6: (3.95, 3.04),
    7: (4.16, 3.08),
    8: (4.33, 3.09),
    10: (4.57, 3.05),
}
REQUIRED = (
    "tokens_per_step",
    "step_ms",
    "draft_ms",
    "verify_ms",
    "baseline_step_ms",
    "speedup",
    "throughput_tok_s",
    "ms_per_token",
)


def evaluate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = run(capsys, "evaluate", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("k", sorted(SEED_TABLE))
def test_evaluate_reproduces_seed_worked_example(capsys, k: int) -> None:
    d = evaluate_json(capsys, "--alpha", "0.8", "--draft-cost-ratio", "0.05", "--k", str(k))
    tokens, speedup = SEED_TABLE[k]
    assert round(d["tokens_per_step"], 2) == tokens
    assert round(d["speedup"], 2) == speedup
    assert set(REQUIRED) <= set(d)


def test_evaluate_seed_k4_times_and_table(capsys) -> None:
    d = evaluate_json(capsys, "--alpha", "0.8", "--draft-cost-ratio", "0.05", "--k", "4", "--target-step-ms", "20")
    # each step costs T (1 + 4 x 0.05) = 1.2 T; T = 20 ms
    assert d["step_ms"] == pytest.approx(24.0) and d["draft_ms"] == pytest.approx(4.0)
    assert d["verify_ms"] == pytest.approx(20.0) and d["baseline_step_ms"] == pytest.approx(20.0)
    assert d["ms_per_token"] == pytest.approx(24.0 / 3.3616)
    assert d["throughput_tok_s"] == pytest.approx(3.3616 / 0.024)
    code, out, _ = run(capsys, "evaluate", "--alpha", "0.8", "-c", "0.05", "--k", "4")
    assert code == 0 and "3.3616" in out and "2.8013" in out and "speedup" in out


def test_evaluate_check_your_understanding(capsys) -> None:
    d = evaluate_json(capsys, "--alpha", "0.6", "--k", "3", "-c", "0")
    assert round(d["tokens_per_step"], 2) == 2.18


def test_beta_command_check_your_understanding(capsys) -> None:
    code, out, _ = run(capsys, "beta", "--p", "0.6,0.3,0.1", "--q", "0.3,0.6,0.1", "--format", "json")
    d = json.loads(out)
    assert code == 0 and d["beta"] == pytest.approx(0.7) and d["residual"] == pytest.approx([1, 0, 0])


def test_evaluate_batch_effect_with_ridge(capsys) -> None:
    d = evaluate_json(capsys, "--alpha", "0.8", "-c", "0.05", "--k", "4", "--batch", "128", "--ridge-tokens", "128")
    assert d["verify_ms"] == pytest.approx(5.0) and round(d["speedup"], 2) == 0.65


def test_evaluate_alphas_and_acceptance_files(capsys) -> None:
    d = evaluate_json(capsys, "--alphas", "0.9,0.8,0.5", "-c", "0")
    assert d["tokens_per_step"] == pytest.approx(2.98) and d["priced_draft"] == "chain k=3"
    d = evaluate_json(capsys, "--acceptance", str(DATA / "vllm_metrics.txt"), "-c", "0.05")
    assert d["tokens_per_step"] == pytest.approx(2.7) and d["priced_draft"] == "chain k=3"
    assert d["alpha_per_position"] == pytest.approx([0.8, 0.75, 0.5])
    d = evaluate_json(capsys, "--acceptance", str(DATA / "vllm_metrics.txt"), "-c", "0.05", "--k", "2")
    assert d["tokens_per_step"] == pytest.approx(1 + 0.8 + 0.6)
    d = evaluate_json(capsys, "--acceptance", str(DATA / "sglang_metrics.txt"), "--k", "4", "-c", "0.05")
    assert d["tokens_per_step"] == pytest.approx(3.2)
    assert "bonus" in d["convention"]


def test_evaluate_tree_file(capsys, tmp_path: Path) -> None:
    d = evaluate_json(capsys, "--tree", str(DATA / "tree_seed.yaml"), "-c", "0.05", "--batch", "8")
    assert d["tokens_per_step"] == pytest.approx(2.53)  # by hand from the file's acceptance table
    assert d["priced_draft"] == "tree of 6 nodes, depth 2" and d["verify_tokens_per_seq"] == 7
    assert d["draft_ms"] == pytest.approx(2 * 0.05)  # two draft passes (depth 2)
    # a file without acceptance: a Sequoia vector by sibling rank from the command line
    f = tmp_path / "t.yaml"
    f.write_text("parents: [-1, -1, 0, 0, 1, 1]\n")
    d = evaluate_json(capsys, "--tree", str(f), "--sibling-probs", "0.6,0.3", "-c", "0.05")
    assert d["tokens_per_step"] == pytest.approx(1 + 0.6 + 0.3 + 0.36 + 0.18 + 0.18 + 0.09)


def test_evaluate_tree_from_alpha(capsys, tmp_path: Path) -> None:
    f = tmp_path / "chain.yaml"
    f.write_text("parents: [-1, 0, 1, 2]\n")
    d = evaluate_json(capsys, "--tree", str(f), "--alpha", "0.8", "-c", "0.05")
    assert round(d["tokens_per_step"], 2) == 3.36 and round(d["speedup"], 2) == 2.80


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--alpha", "1.5", "-c", "0.05", "--k", "4"), "--alpha must be in [0, 1]"),
        (("--alpha", "-0.2", "-c", "0.05", "--k", "4"), "--alpha must be in [0, 1]"),
        (("--alphas", "0.9,1.2", "-c", "0.05"), "must lie in [0, 1]"),
        (("--alpha", "0.5", "-c", "0.05", "--k", "-1"), "--k must be in [0, 64]"),
        (("--tree", str(DATA / "tree_cycle.yaml"), "--alpha", "0.5", "-c", "0.05"), "not a tree"),
        (("--acceptance", str(DATA / "no_spec_metrics.txt"), "-c", "0.05"), "no speculative-decoding metrics"),
        (("--acceptance", str(DATA / "absent.txt"), "-c", "0.05"), "no such file"),
        (("--acceptance", str(DATA / "sglang_metrics.txt"), "-c", "0.05"), "pass --k"),
        (("--alpha", "0.5", "-c", "0.05"), "--k"),
        (("--alpha", "0.5", "--k", "3"), "cost source"),
        (("--alpha", "0.5", "--k", "3", "-c", "0.1", "-H", "h100-sxm"), "not both"),
        (
            ("--alpha", "0.5", "--k", "3", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "llama-2-7b"),
            "must share the target's tokenizer",
        ),
        (("--alpha", "0.5", "--k", "3", "-c", "0.1", "--batch", "0"), "--batch"),
        (("--alpha", "0.5", "--alphas", "0.5", "--k", "3", "-c", "0.1"), "give one acceptance"),
        (("--alphas", "0.9,0.8", "--k", "3", "-c", "0.1"), "exceeds the 2 positions"),
        (("--alpha", "0.5", "--k", "3", "-H", "h999", "-m", "llama-3.1-8b", "-d", "eagle3"), "unknown hardware 'h999'"),
        (("--alpha", "0.5", "--k", "3", "-H", "h100-sxm", "-m", "llama-9000", "-d", "eagle3"), "unknown model"),
        (("-H", "h100-sxm", "-m", "llama-3.1-8b", "--k", "3"), "needs all of --hardware, --model and --draft"),
        (("--tree", str(DATA / "absent.yaml"), "--alpha", "0.5", "-c", "0.05"), "no such tree file"),
        (("--alpha", "0.5", "--k", "3", "--sibling-probs", "0.5", "-c", "0.05"), "--sibling-probs applies to --tree"),
        (("--acceptance-length", "6", "--k", "4", "-c", "0.05"), "[1, k+1] = [1, 5]"),
        (("--alpha", "0.5", "--k", "3", "-c", "0.1", "-o", "x.csv"), "--output applies to --grid only"),
        (
            ("-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "llama-3.2-1b", "--k", "4", "--batch", "100",
             "--context", "4096"),
            "does not fit",
        ),
    ],
)
def test_bad_input_one_line_exit_2(capsys, args: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, "evaluate", *args)
    assert code == 2
    assert message in err and err.count("\n") == 1 and err.startswith("error: ")
    assert "Traceback" not in err


def test_evaluate_real_route_table_and_json(capsys) -> None:
    """The answer echoes the question as asked and what was priced: model, weights, layout, draft shape and the
    acceptance's source."""
    args = ("-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "--alpha", "0.8", "--k", "4", "--batch", "8")
    d = evaluate_json(capsys, *args)
    assert set(REQUIRED) <= set(d) and d["k"] == 4 and d["alpha"] == 0.8 and d["batch"] == 8
    assert d["priced_model"] == "llama-3.1-8b" and d["priced_layout"] == "tp 1" and d["gpus"] == 1
    assert d["priced_draft"] == "eagle3: chain k=4" and d["priced_weights"].startswith("bf16")
    assert d["memory_gib_per_gpu"] < d["memory_capacity_gib"] and d["acceptance_source"] == "alpha=0.8"
    assert d["cost_source"].startswith("roofline cost model: llama-3.1-8b on 1x h100-sxm")
    code, out, _ = run(capsys, "evaluate", *args)
    assert code == 0 and "memory per GPU (GiB)" in out and "eagle3: chain k=4" in out
    assert "speculative step (llama-3.1-8b on 1x h100-sxm), batch 8" in " ".join(out.split())


def test_validate_command_passes_and_reports(capsys) -> None:
    code, out, err = run(capsys, "validate", "--samples", "2000", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["failed"] == 0 and len(d["checks"]) >= 10
    cases = " ".join(c["case"] for c in d["checks"])
    assert "negative control" in cases and "tree" in cases and "greedy" in cases
    tokens_rows = [c for c in d["checks"] if c["quantity"] == "tokens/step"]
    assert all(abs(c["z"]) < 4 for c in tokens_rows)


def test_validate_table_output(capsys) -> None:
    code, out, _ = run(capsys, "validate", "--samples", "500")
    assert code == 0 and "checks passed" in out and "formula" in out


def test_validate_exits_1_when_a_check_fails(capsys, monkeypatch) -> None:
    import specsim.acceptance.check as v

    bad = v.CheckRow("forced failure", "tokens/step", 2.0, 3.0, 0.01, 100.0, None, False)
    monkeypatch.setattr(v, "run_validation", lambda **kwargs: [bad])
    code, out, _ = run(capsys, "validate")
    assert code == 1 and "0/1 checks passed" in out


def test_evaluate_grid_writes_answers_and_refuses_a_file_without_the_needed_columns(capsys, tmp_path: Path) -> None:
    grid = tmp_path / "g.csv"
    grid.write_text("hardware,model,draft,k,batch,label\nh100-sxm,llama-3.1-8b,eagle3,3,4,a\n"
                    "h100-sxm,llama-3.1-8b,eagle3,3,0,bad batch\n")
    out = tmp_path / "out.csv"
    code, _, err = run(capsys, "evaluate", "--grid", str(grid), "-o", str(out))
    import pandas as pd

    df = pd.read_csv(out, keep_default_na=False)
    assert code == 4 and "1 of 2 rows" in err  # a bad row: its reason in `error`, the others answered
    assert list(df["label"]) == ["a", "bad batch"] and df["error"][0] == "" and "batch" in df["error"][1]
    assert float(df["speedup"][0]) > 1.0
    wrong = tmp_path / "w.csv"
    wrong.write_text("model,draft\nllama-3.1-8b,eagle3\n")
    out2 = tmp_path / "out2.csv"
    code, _, err = run(capsys, "evaluate", "--grid", str(wrong), "-o", str(out2))
    assert code == 2 and "needs all of --hardware, --model and --draft" in err and not out2.exists()


def test_validate_modules_without_the_tables_is_one_line(capsys, monkeypatch) -> None:
    import specsim.cost.aiconfigurator as aic

    monkeypatch.setattr(aic, "installed_version", lambda: None)
    code, out, err = run(capsys, "validate", "--modules")
    assert code == 2 and out == "" and err.count("\n") == 1 and 'pip install -e ".[tables]"' in err
