# ncu per-kernel summaries of one 128-token prefill and of decode steps at batch 256 (Llama-3.1-8B
# dummy weights), from the staged perf binaries.
set -u
S=.devrun-perf; [[ -d $S/bin ]] || tar -xJf $S/bin.tar.xz -C $S
for d in /usr/local/cuda/lib64 /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do [[ -e $d/libcublasLt.so.13 ]] && L=$d && break; done
export LD_LIBRARY_PATH=$PWD/$S/lib:$L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
C="$S/bin/inflight bench latency --dummy-weights --arch llama-3.1-8b --device cuda --max-model-len 4096 --kv-cache-memory 0.5 --num-iters-warmup 0 --num-iters 1"
prof(){ n=$1; shift; timeout 240 $NCU --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel "$@" > $OUT/prof_$n.txt 2>&1; echo "== $n rc=$?"; grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum' $OUT/prof_$n.txt | sed -E 's/\(inflight::[A-Za-z]+Params\)//; s/, Context.*//; s/ +/ /g' | paste - - | cut -c1-150 | grep -v fill_random; }
prof p128 $C --batch-size 1 --input-len 128 --output-len 1
prof d256 $C --batch-size 256 --input-len 128 --output-len 3 --max-num-seqs 256 --max-num-batched-tokens 8192
