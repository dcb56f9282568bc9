#!/usr/bin/env bash
# GPU check of the bandit sampler and sweep engine (run on a machine with an accelerator; 76 s on an H200, 2026-11-29).
# Uses the machine's own Python (JAX with CUDA, equinox, jaxtyping, scipy, pytest); writes to ${OUT:-.}.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-.}
python3 -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$out/device_check.txt"
# exactness on the accelerator: jnp Threefry == JAX's, batch sampler == per-element loop, chi-square
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_bandit_core.py \
    -k "binomial or threefry or prefix or sigmoid_pair" 2>&1 | tail -4 | tee -a "$out/device_check.txt"
# throughput: 10^5 configurations on the one GPU (NumPy baseline on the host CPU, single thread)
timeout 300 python3 benchmarks/bandit_throughput.py --devices 1 --configs 100000 --steps 400 --numpy-steps 20 \
    --repeats 3 2>&1 | tee -a "$out/device_check.txt"
