#!/usr/bin/env bash
# GPU recipe v8 (issue 11): the shipped conv code model (engine/model/conv_world.py) on one
# 15-minute H200 lease. Since stop 23 the code model is what ships, so every arm is one
# (v7 still spent four of its five arms on the regressor and the denoiser, MODEL.md v3-v6).
# Every arm warm-starts from the shipped world.pt or a kept candidate, so progress
# accumulates across sessions even when runs/ is gone.
#
#   bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]           # the lease (about 9 min; arms train 4 min)
#   SMOKE=1 bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]   # toy scale, on a CPU
#
# TEXT_TABLE (default runs/text_table.npz, carried to the device) comes from
# `python -m engine.train text-table` here: the device has no text encoder.
#
# Timeline on one H200 + 16 cores (the device allows 600 s per command; a watchdog ships
# whatever exists at DEADLINE_S = 540 s):
#   data      256 episodes x 400 frames on every core (~30 s), a sentence every 1.5 s, a
#             reference image arriving mid-way in 60 % of episodes (the world recolours)
#   latents   the shipped tokenizers encode it on the GPU (frozen: openings.pt stays valid)
#   generator four arms side by side on the GPU, same data and minutes, batch 256 windows of
#             the model's own 8-frame chains with the camera warp, an eighth showing a
#             reference image arrive (engine/train/conv_generator.py), each printing its
#             throughput:
#               `codes`    the shipped world.pt continued at lr 1e-4, the Error Bank in a
#                          quarter of every batch (how it was trained on the CPU, MODEL.md v10);
#               `fast`     the same at lr 3e-4 (a GPU gives far more steps than any CPU run);
#               `residual` candidates/conv_residual.pt, the code model with a residual second
#                          code per cell (MODEL.md v17: the ceiling 22.15 -> 22.98 dB, 1,305 CPU
#                          steps of the whole model were too few for the trunk to use it);
#               `nobank`   `codes` without the Error Bank (brightness_drift_no_bank).
#   measure   every arm on the CPU as soon as it is trained (engine/train/measure.py), JSON and
#             long_play.png into OUT; OUT/gpu.csv samples utilisation and memory every 5 s
#   ship      OUT/ARM/world.pt for every arm (tokenizers unchanged)
# Back here: compare OUT/measure_*.json with the shipped weights' measurement (MODEL.md),
# look at the PNGs, and copy a world.pt into engine/weights only if it is better.
set -euo pipefail
out=${1:?usage: gpu_recipe.sh OUT_DIR [TEXT_TABLE]}
table=${2:-runs/text_table.npz}
py=${PYTHON:-python3}
base=${WEIGHTS:-engine/weights}
if [[ -n "${SMOKE:-}" ]]; then  # toy sizes: proves the wiring on a CPU in a few minutes
    episodes=4 frames=120 batch=4 minutes=0.3 long_frames=40 fid_episodes=1
    runs=runs/smoke_recipe device=cpu measure_threads=1 bank="--bank-every 40 --bank-rollouts 2"
else
    episodes=256 frames=400 batch=256 minutes=4 long_frames=2000 fid_episodes=10
    runs=runs/gpu_v8 device=auto measure_threads=2 bank="--bank-every 100 --bank-rollouts 64"
fi
workers=${WORKERS:-$(nproc --all)}
arms="codes fast residual nobank"
data=$runs/data logs=$runs/logs
mkdir -p "$out" "$logs"
stamp() { echo "[$(date +%T)] $*"; }
collect_logs() { for f in "$logs"/*.log; do echo "== $f"; tail -c 2500 "$f"; done > "$out/log.txt"; }
ship() {  # whatever exists
    for arm in $arms; do
        [[ -f $runs/$arm/weights/world.pt ]] && mkdir -p "$out/$arm" &&
            cp "$runs/$arm/weights/world.pt" "$out/$arm/"
    done
    for arm in $arms; do
        [[ -f $runs/measure_$arm/measure.json ]] &&
            cp "$runs/measure_$arm/measure.json" "$out/measure_$arm.json"
        [[ -f $runs/measure_$arm/long_play.png ]] &&
            cp "$runs/measure_$arm/long_play.png" "$out/long_play_$arm.png"
        [[ -f $runs/$arm/loss.png ]] && cp "$runs/$arm/loss.png" "$out/loss_$arm.png"
    done
    [[ -f $logs/gpu.csv ]] && cp "$logs/gpu.csv" "$out/"
    return 0
}
trap 'ship; collect_logs' EXIT
( sleep "${DEADLINE_S:-540}"; echo "deadline: shipping what exists"; ship; collect_logs ) &
watchdog=$!
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 5 \
        > "$logs/gpu.csv" 2> /dev/null &
    monitor=$!
fi
waitjobs() {  # every background job except the watchdog and the GPU monitor
    wait $(jobs -p | grep -v -e "^$watchdog$" -e "^${monitor:-none}$")
}

stamp "data: $episodes episodes x $frames frames on $workers workers"
$py -m engine.data generate --out "$data" --episodes "$episodes" --frames "$frames" \
    --workers "$workers" --episodes-per-shard 4 --prompt-rate 0.033 --image-rate 0.6 --quiet

stamp "latents (shipped tokenizers)"
$py -m engine.train latents --data "$data" --weights "$base" --out "$runs/latents" \
    --text-table "$table" --device "$device" > "$logs/latents.log" 2>&1

stamp "conv generator arms side by side: $arms"
codes="--codes 1024 --unroll 8 --image-share 0.125 --audio-history 4 --camera-warp"
declare -A arm_args=(
    [codes]="$codes --bank-share 0.25 --lr 1e-4"
    [fast]="$codes --bank-share 0.25 --lr 3e-4 --seed 2"
    [residual]="$codes --residual-codes 1024 --bank-share 0.25 --lr 1e-4"
    [nobank]="$codes --bank-share 0 --lr 1e-4"
)
# The code arms continue the shipped world.pt (training picks it up without --init); the
# residual arm continues the kept residual model, or grows the stage on the shipped one.
residual=engine/weights/candidates/conv_residual.pt
if [[ -f $residual ]]; then
    arm_args[residual]+=" --init $residual"
fi
for arm in $arms; do
    # shellcheck disable=SC2086  # the arm's flags are meant to split
    $py -m engine.train conv --data "$data" --weights "$base" --out "$runs/$arm" \
        --minutes "$minutes" --batch "$batch" --threads 2 --device "$device" \
        --text-table "$table" $bank ${arm_args[$arm]} > "$logs/gen_$arm.log" 2>&1 &
done
waitjobs || { tail -30 "$logs"/gen_*.log; exit 1; }
for arm in $arms; do grep -h '"throughput"' "$logs/gen_$arm.log" || true; done
ship  # the weights are out before the (CPU-only) measurements

stamp "measure every arm on the CPU"
for arm in $arms; do
    OMP_NUM_THREADS=$measure_threads $py -m engine.train measure --threads "$measure_threads" \
        --weights "$runs/$arm/weights" --out "$runs/measure_$arm" --episodes "$fid_episodes" \
        --long-frames "$long_frames" --text-table "$table" > "$logs/measure_$arm.log" 2>&1 &
done
waitjobs || true
kill "$watchdog" "${monitor:-}" 2>/dev/null || true
stamp "done"
