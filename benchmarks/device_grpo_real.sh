#!/usr/bin/env bash
# GPU run of experiments/grpo_real.py in full mode (SmolLM2-135M-Instruct: 60 GRPO steps of 8 x 8, greedy
# accuracy on 400 held-out problems before/after, Lanczos curvature, K_ref x eta stability sweep of 24 runs).
# For one accelerator (sized for an H200, expected well under 10 minutes); not yet run on one.
# Uses the machine's own Python (JAX with CUDA, flax, optax, tokenizers, rich, matplotlib); writes to ${OUT:-.}.
# Needs the converted model: models/smollm2-135m-instruct (make real-model), or MODEL_DIR=<folder>, or a
# GGUF at build/real-model/SmolLM2-135M-Instruct.Q4_1.gguf (converted here with grpojax convert-gguf).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-.}
log="$out/device_grpo_real.txt"
python3 -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$log"
model=models/smollm2-135m-instruct
if [ -n "${MODEL_DIR:-}" ] && [ "$MODEL_DIR" != "$model" ]; then
    mkdir -p models && ln -sfn "$(cd "$MODEL_DIR" && pwd)" "$model"
fi
gguf=build/real-model/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$model/config.json" ] && [ -f "$gguf" ]; then
    timeout 120 python3 -c "import sys; from grpojax.cli import main; sys.exit(main(sys.argv[1:]))" \
        convert-gguf "$gguf" "$model" --force 2>&1 | tail -2 | tee -a "$log"
fi
if [ ! -f "$model/config.json" ]; then
    echo "device_grpo_real: $model is missing (make real-model, MODEL_DIR=..., or $gguf)" | tee -a "$log"
    exit 2
fi
uptime | tee -a "$log"
start=$(date +%s)
# full mode; the experiment's own outputs (summary.json, grpo_real.{md,json,png}) go to $out
timeout 540 python3 experiments/grpo_real.py --out "$out/grpo_real" --results "$out" 2>&1 \
    | grep -v -e '━' | tail -20 | tee -a "$log"
echo "wall $(( $(date +%s) - start )) s" | tee -a "$log"
