#!/bin/bash
# Every output a user sees that a refactoring must keep byte-identical (issue 18), written into OUTDIR:
# each bundled scenario's plan (JSON and table), its report's plan.json, report.md and engine configs,
# simulate -f json (and a sweep), evaluate, ops and validate --published. Run it before and after a change
# and compare:  benchmarks/pinned_outputs.sh /tmp/before; ...; benchmarks/pinned_outputs.sh /tmp/after;
# diff -r /tmp/before /tmp/after
set -u
out=${1:?usage: pinned_outputs.sh OUTDIR}
rm -rf "$out" && mkdir -p "$out"
cd "$(dirname "$0")/.."
S="python -m specsim"
export COLUMNS=80
run() { name=$1; shift; "$@" > "$out/$name" 2> "$out/$name.err"; echo "rc=$?" >> "$out/$name"; }
for f in scenarios/*.yaml; do
  b=$(basename "$f" .yaml)
  run "plan-$b.json" $S plan "$f" -f json &
  run "plan-$b.txt" $S plan "$f" &
  wait
  # the report's own summary names its folder and its run time: left out
  $S report "$f" -o "$out/report-$b" -f json 2>/dev/null | grep -v '"output":\|"seconds":' > "$out/report-$b.stdout"
  rm -rf "$out/report-$b/figures" "$out/report-$b/report.html"  # pixels and the HTML wrapper of report.md
done
for b in chat-traffic-llama8b-h100 code-edit-prompt-lookup llama8b-1b-draft-h100 reasoning-h200; do
  run "sim-$b.json" $S simulate "scenarios/$b.yaml" -f json --requests 300 &
done
wait
run sim-sweep.json $S simulate scenarios/chat-traffic-llama8b-h100.yaml -f json --requests 200 --sweep-rates 4,8
run evaluate.txt $S evaluate -H h100-sxm -m llama-3.1-8b --draft eagle3 --alpha 0.8 --k 4 --batch 8
run evaluate2.json $S evaluate -H h100-sxm -m llama-3.1-70b --tp 4 --draft llama-3.2-1b --alpha 0.7 --k 3 \
  --batch 16 -f json
run ops.txt $S ops -H h100-sxm -m llama-3.1-8b
run tree.json $S evaluate -H h100-sxm -m llama-3.1-8b --draft eagle3 --topk 4 --num-draft-tokens 16 --k 5 \
  --alpha 0.7 -f json
run validate.json $S validate --published -f json
run validate.txt $S validate --published
