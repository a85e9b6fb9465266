#!/usr/bin/env bash
# One device call for the Ulysses exchange (issue #4) on 2 GPUs: GPU tests ([gpu] and [flash], then
# the p2p timeout test in its own process - it traps a CUDA context on purpose), the PyTorch
# peer and `ulysses bench exchange|block` at S=32K H=32 H_kv=8 D=128 in the same call, and
# run/compare in single-process and torchrun modes. Logs under $OUT, short summary last.
# Usage (device machine, repo root): bench/exchange/run_gpu.sh BIN_DIR [SEQ_LEN]
set -u
B=${1:?usage: run_gpu.sh BIN_DIR [SEQ_LEN]}
S=${2:-32768}
O=${OUT:-/tmp/exchange_out}
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
SC="--model llama-3.1-8b --profile h200-sxm-141gb --gpus 2 --sp-size 2 --seq-len $S"
nvidia-smi topo -m > "$O/topo.txt" 2>&1
timeout 300 "$B/ulysses_gpu_tests" "[gpu],[flash]" > "$O/gpu-tests.txt" 2>&1; echo "gpu tests [gpu],[flash] rc=$?"
timeout 60 "$B/ulysses_gpu_tests" "[p2p_timeout]" > "$O/p2p-timeout.txt" 2>&1; echo "gpu test [p2p_timeout] rc=$?"
timeout 120 torchrun --nproc_per_node 2 bench/peers/ulysses_peer.py --seq-len "$S" > "$O/peer.json" 2> "$O/peer.err"
echo "peer rc=$?"
timeout 120 "$B/ulysses" bench exchange $SC --slices 1,2 --peer "$O/peer.json" > "$O/bench-exchange.txt" 2>&1
echo "bench exchange rc=$?"
timeout 120 "$B/ulysses" bench block $SC --peer "$O/peer.json" > "$O/bench-block.txt" 2>&1; echo "bench block rc=$?"
ULYSSES_A2A_TRANSPORT=nccl timeout 120 "$B/ulysses" bench block $SC --peer "$O/peer.json" > "$O/bench-block-nccl.txt" 2>&1
echo "bench block (nccl) rc=$?"
timeout 120 "$B/ulysses" compare --backend cuda $SC > "$O/compare-single.txt" 2>&1; echo "compare single rc=$?"
timeout 150 torchrun --nproc_per_node 2 --no-python "$B/ulysses" compare --backend cuda $SC > "$O/compare-torchrun.txt" 2>&1
echo "compare torchrun rc=$?"
echo "== summary"
tail -2 "$O/gpu-tests.txt"; tail -3 "$O/p2p-timeout.txt"
grep -E "^\s*(ulysses|nccl)|x \(target|faster|validation" "$O/bench-exchange.txt"
grep -E "fwd\+bwd|PyTorch" "$O/bench-block.txt" "$O/bench-block-nccl.txt"
grep -E "backend cuda|a2a\.|block" "$O/compare-single.txt" | head -12
grep -E "backend cuda|a2a\.qkv|correct|passed" "$O/compare-torchrun.txt" | head -6
