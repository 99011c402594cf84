"""Published figures of adaptive draft-length rules (acceptance/adaptive.py): sourced data, nothing here is
estimated."""

from __future__ import annotations

#: vllm-project/vllm PR #52992 ("[WIP][Model Runner V2] Enable adaptive verification for more
#: attention backends", open, description 2026-08-19), benchmark "Speed-Bench 1K/2K, # Prompts=512,
#: Concurrency=64, Temp=1, Top-p=0.95", nvidia/GLM-5.2-NVFP4 + Inferact/GLM-5.2-DSpark 16 on
#: 4xGB200: vLLM per-position acceptance (unconditional, P(draft i accepted), i = 1..16) of the
#: baseline (fixed 16 drafts verified) and of adaptive verification (DSpark confidence head).
GLM52_DSPARK16_GB200_PER_POSITION: dict[str, tuple[float, ...]] = {
    "fixed_k16": (0.7123, 0.5170, 0.3904, 0.3051, 0.2437, 0.2000, 0.1685, 0.1441,
                  0.1246, 0.1094, 0.0964, 0.0856, 0.0758, 0.0667, 0.0582, 0.0498),
    "adaptive": (0.6967, 0.4642, 0.3179, 0.2345, 0.1818, 0.1494, 0.1256, 0.1079,
                 0.0938, 0.0817, 0.0714, 0.0620, 0.0537, 0.0465, 0.0395, 0.0325),
}

#: Published results of adaptive-draft-length rules. ``figures`` holds the numbers as printed;
#: ``AL`` = mean acceptance length incl. the bonus token. Only what the cited text states.
SOURCES: tuple[dict[str, object], ...] = (
    {
        "id": "vllm-pr52992-glm52-dspark16-gb200-c64",
        "rule": "DSpark confidence head, vLLM adaptive verification (trims the block before verify)",
        "hardware": "4x GB200", "engine": "vLLM (Model Runner V2, PR branch)",
        "models": "nvidia/GLM-5.2-NVFP4 + Inferact/GLM-5.2-DSpark 16",
        "workload": "Speed-Bench 1K/2K, 512 prompts, concurrency 64, temperature 1, top-p 0.95",
        "figures": {"AL_fixed": 4.35, "AL_adaptive": 3.76,
                    "acceptance_rate_pct_fixed": 20.92, "acceptance_rate_pct_adaptive": 17.24,
                    "output_tok_s_baseline": 1588.78, "output_tok_s_adaptive": 4508.91,
                    "median_tpot_ms_baseline": 38.95, "median_tpot_ms_adaptive": 13.00,
                    "per_position": "GLM52_DSPARK16_GB200_PER_POSITION"},
        "source": "https://github.com/vllm-project/vllm/pull/52992 (description, 'Benchmarks' table)",
        "notes": "acceptance rate = (AL - 1) / 16 in both arms, so its denominator is the 16 proposed "
                 "drafts, not the verified ones: the mean verified length is not reported. The "
                 "'Baseline' arm speculates (AL 4.35); which verification it used is the PR's own.",
    },
    {
        "id": "vllm-blog-dspark-adaptive-verification-dsv4pro-b300",
        "rule": "DSpark confidence head, global top-B budget maximising tokens per step time "
                "(num_speculative_tokens 7, enable_adaptive_verification)",
        "hardware": "8x B300 (SM100), TP8, expert parallel, FP8 KV", "engine": "vLLM main @73b8394",
        "models": "deepseek-ai/DeepSeek-V4-Pro-0813 (DSpark)",
        "workload": "speed_bench qualitative, 880 prompts (240 at c1), temperature 1.0, 512 output tokens, "
                    "concurrency 1..256",
        "figures": {"AL_fixed_arms": "near 3.4 at every load", "AL_adaptive_c1": 3.44,
                    "AL_adaptive_c256": 2.65, "tok_s_c1_adaptive_and_fixed7": 264,
                    "tok_s_c256_adaptive": 8855, "tok_s_c256_no_spec": 6267,
                    "vs_best_fixed": "5-10% ahead c16-c64, 30% at c128, 90% at c256",
                    "fixed7_vs_no_spec_c256": "-53%"},
        "source": "vllm-project/vllm-project.github.io _posts/2026-08-14-dspark-adaptive-verification.md "
                  "(Results); https://github.com/vllm-project/vllm/pull/47808",
        "notes": "per-position acceptance on DeepSeek-V4-Flash-0731: last of 7 below 10%, first above 70% "
                 "(bounds only).",
    },
    {
        "id": "hf-blog-dynamic-speculation-rtx4090",
        "rule": "draft top-1 probability < assistant_confidence_threshold stops drafting "
                "(transformers >= 4.45 default; blog's settings 0.4 and num_assistant_tokens 20)",
        "hardware": "RTX 4090", "engine": "Hugging Face transformers assisted generation, batch 1",
        "models": "8 pairs (e.g. Llama-3.1-8B + Llama-3.2-1B)", "workload": "greedy (temperature 0)",
        "figures": {"speedup_dynamic_vs_target_alone": {
            "opt-6.7b/opt-125m summarization": 2.71, "opt-6.7b/opt-125m open-ended": 1.59,
            "codegen-6B/codegen-350M code": 1.09, "flan-t5-xl/flan-t5-small summarization": 1.31,
            "Llama-3.1-8B/Llama-3.2-1B summarization": 1.52, "Llama-3.1-8B/Llama-3.2-1B open-ended": 1.18,
            "Llama-3.1-8B/Llama-3.2-1B code": 1.15, "whisper-large-v2/whisper-tiny ASR": 1.51},
            "oracle_vs_static5_mbpp_example": "static k=5: 38 target / 192 draft passes; "
                                              "oracle: 27 target / 129 draft passes"},
        "source": "huggingface/blog dynamic_speculation_lookahead.md (Benchmarking table)",
        "notes": "compared with transformers' 'heuristic' schedule, not with the best fixed k.",
    },
    {
        "id": "specdecpp-llama2-chat-7b-70b-a100",
        "rule": "trained acceptance-prediction head; stop when predicted P(>=1 rejection) > threshold",
        "hardware": "2x A100-80G (bf16)", "engine": "SpecDec++ reference (HF transformers)",
        "models": "llama-2-chat 7B draft + 70B target", "workload": "Alpaca, GSM8K, HumanEval; sampling",
        "figures": {"speedup_alpaca": 2.04, "speedup_gsm8k": 2.26, "speedup_humaneval": 2.23,
                    "gain_vs_baseline_specdec_pct": {"alpaca": 7.2, "gsm8k": 9.4, "humaneval": 11.1}},
        "source": "Huang, Guo, Wang, arXiv:2405.19715v3 abstract; hardware from "
                  "github.com/Kaffaljidhmah2/SpecDec_pp README",
        "notes": "mean drafted/accepted lengths are in the paper's tables, not read here.",
    },
    {
        "id": "disco-mamou-2024",
        "rule": "classifier decides continue/stop after each draft token",
        "hardware": "not read", "engine": "HF transformers",
        "models": "four datasets/model pairs", "workload": "see paper",
        "figures": {"avg_speedup_vs_best_static_sl_pct": 10},
        "source": "Mamou et al., arXiv:2405.04304v5 abstract ('average speedup of 10% compared to the best "
                  "static SL baseline'; v1: 10.3%)",
        "notes": "",
    },
    {
        "id": "adaedl-agrawal-2024",
        "rule": "entropy-based lower bound on acceptance probability; stop below a (dynamic) threshold",
        "hardware": "not read", "engine": "see paper", "models": "several pairs", "workload": "several",
        "figures": {"vs_static_draft_length_pct": "10-57", "vs_other_training_free_pct": "up to 10"},
        "source": "Agrawal, Jeon, Lee, arXiv:2410.18351v1 abstract",
        "notes": "",
    },
    {
        "id": "higgs-pr258-confidence-gate-qwen36-27b-mtp",
        "rule": "MTP draft loop stops when the head's per-token confidence < HIGGS_MTP_CONFIDENCE_MIN, "
                "on top of an adaptive draft depth",
        "hardware": "not stated in the PR text read", "engine": "panbanda/higgs",
        "models": "Qwen3.6-27B-mtp (8-bit)", "workload": "bench_speculative, 3 repeats",
        "figures": {"tok_s_code": "24.34 -> 24.44 (+0.4%)", "tok_s_prose": "19.47 -> 19.52 (+0.25%)",
                    "threshold_0p5": "+0.8%"},
        "source": "https://github.com/panbanda/higgs/pull/258 (negative result, closed)",
        "notes": "a confidence stop adds little once the depth is already adaptive.",
    },
)
