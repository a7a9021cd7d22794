#!/usr/bin/env bash
# GPU recipe v2 (issue 11): one 15-minute H200 lease; every stage warm-starts from engine/weights,
# so progress accumulates across sessions even when runs/ is gone.
#
#   bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]           # the lease (about 9 min)
#   SMOKE=1 bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]   # toy scale, on a CPU
#
# TEXT_TABLE (default runs/text_table.npz, carried to the device) comes from
# `python -m engine.train text-table` here: the device has no text encoder.
#
# Timeline on one H200 + 16 cores (about 9 minutes; the device allows 600 s per command):
#   data      256 episodes x 300 frames on every core (~30 s), sentences every 1.5 s
#   latents   the shipped tokenizers encode it on the GPU (frozen: openings.pt stays valid)
#   bank      the Error Bank: 8 CPU workers roll the shipped generator out from true context
#             and store histories at 5..160 frames, equally many per error quartile (~2 min)
#   generator two fine-tunes side by side on the GPU (3.5 min), same steps, data, warm start:
#             with the Error Bank (25% of every batch) and without it (the ablation
#             brightness_drift_no_bank); both with rollout context, context noise up to 0.3
#             and run-time-sized context masks (engine/train/finetune.py)
#   decoder   the GameNGen decoder fine-tune on the bank generator's own latents (1 min)
#   ship      OUT_DIR/weights (fp16 world.pt + video_ae.pt of the bank run), OUT_DIR/nobank/
#   measure   the three candidates on the CPU in parallel (engine/train/measure.py: psnr
#             h1/h16/h64, sharpness, seams, 2,000-frame walking brightness drift), JSON into
#             OUT_DIR; if the lease ends first, run the same command here on the weights
# A watchdog copies whatever weights exist if the lease's end draws near (DEADLINE_S).
# Back here: compare OUT_DIR/measure_*.json with runs/measure/baseline, look at the PNGs,
# and copy the weights into engine/weights only if they are better (MODEL.md says how).
set -euo pipefail
out=${1:?usage: gpu_recipe.sh OUT_DIR [TEXT_TABLE]}
table=${2:-runs/text_table.npz}
py=${PYTHON:-python3}
base=${WEIGHTS:-engine/weights}
if [[ -n "${SMOKE:-}" ]]; then  # toy sizes: proves the wiring on a CPU in a few minutes
    episodes=4 frames=200 bank_workers=2 rollouts=1 horizons=5,16 gen_steps=2 gen_batch=4
    dec_steps=2 dec_batch=2 gen_minutes=2 dec_minutes=1 long_frames=40 fid_episodes=1
    runs=runs/smoke_recipe device=cpu
else
    episodes=256 frames=300 bank_workers=8 rollouts=6 horizons=5,16,48,96,160 gen_steps=3000
    gen_batch=128 dec_steps=1500 dec_batch=32 gen_minutes=3.5 dec_minutes=1
    long_frames=2000 fid_episodes=10 runs=runs/gpu_v2 device=auto
fi
workers=${WORKERS:-$(nproc --all)}
data=$runs/data logs=$runs/logs
mkdir -p "$out" "$logs"
stamp() { echo "[$(date +%T)] $*"; }
collect_logs() { for f in "$logs"/*.log; do echo "== $f"; tail -c 2500 "$f"; done > "$out/log.txt"; }
ship() {  # whatever exists: the bank generator (+ tuned decoder), and the ablation's generator
    mkdir -p "$out/weights" "$out/nobank"
    for f in world.pt video_ae.pt; do
        for src in "$runs/decoder/weights/$f" "$runs/bank/weights/$f"; do
            [[ -f $src ]] && { cp "$src" "$out/weights/$f"; break; }
        done
    done
    [[ -f $runs/nobank/weights/world.pt ]] && cp "$runs/nobank/weights/world.pt" "$out/nobank/"
    return 0
}
trap 'ship; collect_logs' EXIT
# The device runs one command for at most 600 s: ship by 540 s whatever the stages reached.
( sleep "${DEADLINE_S:-540}"; echo "deadline: shipping what exists"; ship; collect_logs ) &
watchdog=$!

stamp "data: $episodes episodes x $frames frames on $workers workers"
$py -m engine.data generate --out "$data" --episodes "$episodes" --frames "$frames" \
    --workers "$workers" --episodes-per-shard 4 --prompt-rate 0.033 --quiet

stamp "latents (shipped tokenizers) + Error Bank ($bank_workers CPU workers)"
$py -m engine.train latents --data "$data" --weights "$base" --out "$runs/latents" \
    --text-table "$table" --device "$device" > "$logs/latents.log" 2>&1
bank_files=()
for k in $(seq 1 "$bank_workers"); do
    OMP_NUM_THREADS=1 $py -m engine.train errorbank --threads 1 --data "$data" \
        --weights "$base" --out "$runs/bank_$k" --rollouts "$rollouts" --horizons "$horizons" \
        --seed "$k" --error-bank "$runs/errorbank_$k.pt" > "$logs/errorbank_$k.log" 2>&1 &
    bank_files+=("$runs/errorbank_$k.pt")
done
wait $(jobs -p | grep -v "^$watchdog$") || { tail -20 "$logs"/errorbank_*.log; exit 1; }
bank=$(IFS=,; echo "${bank_files[*]}")

stamp "generator fine-tunes side by side: with the Error Bank and without"
for arm in bank nobank; do
    extra=(); [[ $arm == bank ]] && extra=(--error-bank "$bank")
    $py -m engine.train finetune --data "$data" --weights "$base" --out "$runs/$arm" \
        --steps "$gen_steps" --minutes "$gen_minutes" --batch "$gen_batch" --threads 2 \
        --device "$device" "${extra[@]}" > "$logs/gen_$arm.log" 2>&1 &
done
wait $(jobs -p | grep -v "^$watchdog$") || { tail -30 "$logs"/gen_*.log; exit 1; }
tail -c 400 "$logs/gen_bank.log"; tail -c 400 "$logs/gen_nobank.log"

stamp "decoder fine-tune on the bank generator's latents"
$py -m engine.train decoder --data "$data" --weights "$runs/bank/weights" \
    --out "$runs/decoder" --steps "$dec_steps" --minutes "$dec_minutes" --batch "$dec_batch" \
    --device "$device" > "$logs/decoder.log" 2>&1 || { tail -30 "$logs/decoder.log"; exit 1; }
ship  # the weights are out before the (optional, CPU-only) measurements start

stamp "measure (CPU, in parallel)"
for name in decoder bank nobank; do
    OMP_NUM_THREADS=2 $py -m engine.train measure --threads 2 --weights "$runs/$name/weights" \
        --out "$runs/measure_$name" --episodes "$fid_episodes" --long-frames "$long_frames" \
        --text-table "$table" \
        > "$logs/measure_$name.log" 2>&1 &
done
wait $(jobs -p | grep -v "^$watchdog$") || true
for name in decoder bank nobank; do
    [[ -f $runs/measure_$name/measure.json ]] && cp "$runs/measure_$name/measure.json" \
        "$out/measure_$name.json"
done
[[ -f $runs/measure_decoder/long_play.png ]] && cp "$runs/measure_decoder/long_play.png" "$out/"
kill "$watchdog" 2>/dev/null || true
stamp "done"
