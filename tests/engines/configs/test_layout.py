"""Engine configurations as files: one per engine that runs the plan, laid out for people."""

from __future__ import annotations

import json

from specsim.engines.configs.layout import ENGINE_CONFIG_DIR, JSON_WIDTH, engine_config_files, pretty_json


def test_one_file_per_engine_with_a_configuration() -> None:
    files = engine_config_files({"vllm": {"a": 1}, "trtllm": None, "note": "speculate up to batch 8"})
    assert files == {f"{ENGINE_CONFIG_DIR}/vllm.json": '{"a": 1}\n'}


def test_flags_one_per_line_numbers_packed() -> None:
    value = {"--flag-" + str(i): "x" * 10 for i in range(8)} | {"row": {str(b): b * 1.5 for b in range(40)}}
    text = pretty_json(value)
    lines = text.splitlines()
    assert json.loads(text) == value and all(len(ln) <= JSON_WIDTH for ln in lines)
    assert lines[1] == '  "--flag-0": "xxxxxxxxxx",' and len(lines) < 8 + 40
