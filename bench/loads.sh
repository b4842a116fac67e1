#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds bench/loads.cu and two module images of its own, then runs it with lazy and with eager
# module loading (docs/benchmarks.md, B6). Needs a GPU and nvcc. Usage: bench/loads.sh [KERNEL_MS]
set -eu
T=$(mktemp -d)
printf 'extern "C" __global__ void touch(unsigned long long *p) { *p += SALT; }\n' >"$T/k.cu"
nvcc -arch=native -fatbin -DSALT=1 -o "$T/p.fatbin" "$T/k.cu"
nvcc -arch=native -fatbin -DSALT=2 -o "$T/n.fatbin" "$T/k.cu"
nvcc -O2 -arch=native -o "$T/loads" bench/loads.cu -lcuda
for mode in LAZY EAGER; do
    echo "== CUDA_MODULE_LOADING=$mode"
    CUDA_MODULE_LOADING=$mode "$T/loads" "$T/p.fatbin" "$T/n.fatbin" "${1:-2000}"
done
rm -rf "$T"
