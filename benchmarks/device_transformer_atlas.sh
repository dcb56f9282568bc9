#!/usr/bin/env bash
# The transformer stability atlas on one accelerator (sized for an H200): the committed predictions of
# experiments/results/transformer_atlas (written before any run) replicated with 64 seeds per (cell, lr) -- a
# constant-lr population of 4,096 members, the cosine cell and the second prompt set -- then population throughput
# against the same member program run one member after another. Not yet run on a device.
# Uses the machine's own Python (JAX with CUDA, flax, optax, tokenizers, rich, pyyaml, pydantic, scipy, matplotlib);
# writes transformer_atlas/ (summary.json, runs.json, md, png), population_throughput_*.json and
# device_transformer_atlas.txt to ${OUT:-.}. About 6-9 minutes expected.
# TINY=1: the same steps at a size that runs on a CPU in a few minutes (the atlas's --quick, N = 4, 16).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-.}
py=${PYTHON:-python3}
log="$out/device_transformer_atlas.txt"
mkdir -p "$out/transformer_atlas"
$py -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$log"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>&1 | tee -a "$log"
uptime | tee -a "$log"
start=$(date +%s)
if [ "${TINY:-0}" = 1 ]; then
    # predictions and runs of the quick atlas, then its runs again with 3 seeds per (cell, lr)
    timeout 600 $py experiments/transformer_atlas.py --quick --stage predict --out "$out/transformer_atlas" 2>&1 | tail -3 | tee -a "$log"
    timeout 600 $py experiments/transformer_atlas.py --quick --stage run --seeds 3 --out "$out/transformer_atlas" 2>&1 | tail -6 | tee -a "$log"
    timeout 600 $py benchmarks/population_throughput.py --quick --out "$out/population_throughput_device.json" 2>&1 | tee -a "$log"
else
    cp experiments/results/transformer_atlas/predictions.json experiments/results/transformer_atlas/predictions.npz "$out/transformer_atlas/"
    timeout 480 $py experiments/transformer_atlas.py --stage run --seeds 64 --out "$out/transformer_atlas" 2>&1 | tail -8 | tee -a "$log"
    # the population program at N = 4,096 (one child process) and the sequential reference at N = 64
    timeout 240 $py benchmarks/population_throughput.py --n 4096 --steps 16 --chunk 4 --modes population \
        --out "$out/population_throughput_device.json" 2>&1 | tee -a "$log"
    timeout 150 $py benchmarks/population_throughput.py --n 64 --steps 8 --chunk 4 --modes sequential \
        --out "$out/population_throughput_device_sequential.json" 2>&1 | tee -a "$log"
fi
nvidia-smi --query-gpu=memory.used --format=csv 2>&1 | tee -a "$log"
echo "wall $(( $(date +%s) - start )) s" | tee -a "$log"
