#!/usr/bin/env bash
# Population throughput on one accelerator (sized for an H200): N = 256, 1,024 and 4,096 GRPO runs of the
# tiny-arith model family in one vmapped program, against the same member program run one member after
# another (measured at N = 64: the sequential rate per run does not depend on N). Not yet run on a device.
# Uses the machine's own Python (JAX with CUDA, flax, optax, tokenizers, rich, pyyaml, pydantic); writes
# population_throughput_device.json and device_population.txt to ${OUT:-.}. About 5-8 minutes expected.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-.}
log="$out/device_population.txt"
python3 -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$log"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>&1 | tee -a "$log"
uptime | tee -a "$log"
start=$(date +%s)
# the population program (one child process per N; its peak host RSS and the device state bytes per member)
timeout 420 python3 benchmarks/population_throughput.py --n 256 1024 4096 --steps 16 --chunk 4 \
    --modes population --out "$out/population_throughput_device.json" 2>&1 | tee -a "$log"
# the sequential reference (the same member program, member after member)
timeout 150 python3 benchmarks/population_throughput.py --n 64 --steps 8 --chunk 4 \
    --modes sequential --out "$out/population_throughput_device_sequential.json" 2>&1 | tee -a "$log"
nvidia-smi --query-gpu=memory.used --format=csv 2>&1 | tee -a "$log"
echo "wall $(( $(date +%s) - start )) s" | tee -a "$log"
