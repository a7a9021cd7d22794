#!/usr/bin/env bash
# GPU recipe v3 (issue 11): one 15-minute H200 lease; every stage warm-starts from engine/weights,
# so progress accumulates across sessions even when runs/ is gone.
#
#   bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]           # the lease (about 9 min)
#   SMOKE=1 bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]   # toy scale, on a CPU
#
# TEXT_TABLE (default runs/text_table.npz, carried to the device) comes from
# `python -m engine.train text-table` here: the device has no text encoder.
#
# Timeline on one H200 + 16 cores (the device allows 600 s per command; a watchdog ships
# whatever exists at DEADLINE_S = 540 s):
#   data      256 episodes x 300 frames on every core (~30 s), sentences every 1.5 s
#   latents   the shipped tokenizers encode it on the GPU (frozen: openings.pt stays valid)
#   bank      meanwhile: the Error Bank from 8 CPU workers (shipped generator rolled out from
#             true context, histories at 5..160 frames, equally many per error quartile), and
#             the audio tokenizer (coherent + texture decoder, engine/model/audio_ae.py) on the GPU
#   generator three fine-tunes side by side on the GPU, same steps, data and warm start
#             (batch 256 x 10 frames each): `main` (Error Bank 25 % of every batch), `nobank`
#             (the same without the bank: brightness_drift_no_bank) and `refine` (main + the
#             latent refiner: on the CPU it lowered drift but raised the seams, so the lease
#             decides it at scale); all with rollout context, context noise to 0.3 and
#             run-time-sized context masks (engine/train/finetune.py). Each prints its
#             throughput.
#   decoder   the GameNGen decoder fine-tune on main's own latents (1 min), while on the GPU
#   audio     main's audio projections learn the new audio tokenizer's latents (1 min)
#   ship      OUT/weights (main world.pt + tuned video_ae.pt), OUT/nobank, OUT/refine,
#             OUT/audio (audio_ae.pt + world.pt + openings.pt: main with the new audio)
#   measure   nobank and refine on the CPU as soon as they are trained, main (+ decoder) once
#             shipped (engine/train/measure.py), JSON into OUT; OUT/gpu.csv samples
#             utilisation and memory every 5 s
# Back here: compare OUT/measure_*.json with runs/measure/baseline, look at the PNGs,
# and copy the weights into engine/weights only if they are better (MODEL.md says how).
set -euo pipefail
out=${1:?usage: gpu_recipe.sh OUT_DIR [TEXT_TABLE]}
table=${2:-runs/text_table.npz}
py=${PYTHON:-python3}
base=${WEIGHTS:-engine/weights}
if [[ -n "${SMOKE:-}" ]]; then  # toy sizes: proves the wiring on a CPU in a few minutes
    episodes=4 frames=200 bank_workers=2 rollouts=1 horizons=5,16 gen_steps=2 gen_batch=4
    dec_steps=2 dec_batch=2 gen_minutes=2 dec_minutes=1 audio_minutes=0.3 audio_steps=2
    long_frames=40 fid_episodes=1 runs=runs/smoke_recipe device=cpu preset=cpu measure_threads=1
else
    episodes=256 frames=300 bank_workers=8 rollouts=6 horizons=5,16,48,96,160 gen_steps=3000
    gen_batch=256 dec_steps=1500 dec_batch=32 gen_minutes=3 dec_minutes=1 audio_minutes=2
    audio_steps=1000 long_frames=2000 fid_episodes=10 runs=runs/gpu_v3 device=auto preset=gpu
    measure_threads=2
fi
workers=${WORKERS:-$(nproc --all)}
data=$runs/data logs=$runs/logs
mkdir -p "$out" "$logs"
stamp() { echo "[$(date +%T)] $*"; }
collect_logs() { for f in "$logs"/*.log; do echo "== $f"; tail -c 2500 "$f"; done > "$out/log.txt"; }
copy_if() { [[ -f $1 ]] && mkdir -p "$2" && cp "$1" "$2/"; return 0; }
ship() {  # whatever exists: main (+ tuned decoder), the two ablations, main with the new audio
    mkdir -p "$out/weights"
    for f in world.pt video_ae.pt; do
        for src in "$runs/decoder/weights/$f" "$runs/main/weights/$f"; do
            [[ -f $src ]] && { cp "$src" "$out/weights/$f"; break; }
        done
    done
    copy_if "$runs/nobank/weights/world.pt" "$out/nobank"
    copy_if "$runs/refine/weights/world.pt" "$out/refine"
    for f in audio_ae.pt world.pt openings.pt; do copy_if "$runs/audio/weights/$f" "$out/audio"; done
    [[ -f $logs/gpu.csv ]] && cp "$logs/gpu.csv" "$out/"
    return 0
}
trap 'ship; collect_logs' EXIT
# The device runs one command for at most 600 s: ship by 540 s whatever the stages reached.
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
    --workers "$workers" --episodes-per-shard 4 --prompt-rate 0.033 --quiet

stamp "latents (shipped tokenizers) + Error Bank ($bank_workers CPU workers) + audio tokenizer"
$py -m engine.train audio --preset "$preset" --data "$data" --weights "$base" \
    --out "$runs/audio_ae" --minutes "$audio_minutes" --device "$device" \
    > "$logs/audio_ae.log" 2>&1 &
audio_ae=$!
$py -m engine.train latents --data "$data" --weights "$base" --out "$runs/latents" \
    --text-table "$table" --device "$device" > "$logs/latents.log" 2>&1
bank_files=()
for k in $(seq 1 "$bank_workers"); do
    OMP_NUM_THREADS=1 $py -m engine.train errorbank --threads 1 --data "$data" \
        --weights "$base" --out "$runs/bank_$k" --rollouts "$rollouts" --horizons "$horizons" \
        --seed "$k" --error-bank "$runs/errorbank_$k.pt" > "$logs/errorbank_$k.log" 2>&1 &
    bank_files+=("$runs/errorbank_$k.pt")
done
for pid in $(jobs -p | grep -v -e "^$watchdog$" -e "^${monitor:-none}$" -e "^$audio_ae$"); do
    wait "$pid" || { tail -20 "$logs"/errorbank_*.log; exit 1; }
done
bank=$(IFS=,; echo "${bank_files[*]}")

stamp "generator fine-tunes side by side: main (Error Bank), nobank, refine (bank + refiner)"
declare -A arm_args=(
    [main]="--error-bank $bank"
    [nobank]=""
    [refine]="--error-bank $bank --refine-width 32"
)
for arm in main nobank refine; do
    # shellcheck disable=SC2086  # the arm's flags are meant to split
    $py -m engine.train finetune --data "$data" --weights "$base" --out "$runs/$arm" \
        --steps "$gen_steps" --minutes "$gen_minutes" --batch "$gen_batch" --threads 2 \
        --device "$device" --text-table "$table" ${arm_args[$arm]} \
        > "$logs/gen_$arm.log" 2>&1 &
done
waitjobs || { tail -30 "$logs"/gen_*.log; exit 1; }
for arm in main nobank refine; do grep -h '"throughput"' "$logs/gen_$arm.log" || true; done
measure() {  # CPU only, in the background: the GPU stages below do not wait for it
    OMP_NUM_THREADS=$measure_threads $py -m engine.train measure --threads "$measure_threads" \
        --weights "$runs/$1/weights" \
        --out "$runs/measure_$1" --episodes "$fid_episodes" --long-frames "$long_frames" \
        --text-table "$table" > "$logs/measure_$1.log" 2>&1 &
}
measure nobank  # the ablations are final now; measuring them meanwhile saves ~2 min
measure refine

stamp "decoder fine-tune on main's latents | main's audio projections on the new audio latents"
$py -m engine.train decoder --data "$data" --weights "$runs/main/weights" \
    --out "$runs/decoder" --steps "$dec_steps" --minutes "$dec_minutes" --batch "$dec_batch" \
    --device "$device" --text-table "$table" > "$logs/decoder.log" 2>&1 &
decoder=$!
wait "$audio_ae" || { tail -30 "$logs/audio_ae.log"; exit 1; }
audio_base=$runs/audio_base
mkdir -p "$audio_base"
cp "$runs/main/weights/"*.pt "$audio_base/"
cp "$runs/audio_ae/audio_ae_final.pt" "$audio_base/audio_ae.pt"
$py -m engine.train openings --dest "$audio_base" > "$logs/audio_openings.log" 2>&1
$py -m engine.train finetune --audio-only --audio-weight 2 --data "$data" \
    --weights "$audio_base" --out "$runs/audio" --steps "$audio_steps" --minutes 1 \
    --batch "$gen_batch" --device "$device" --text-table "$table" \
    > "$logs/audio_adapt.log" 2>&1 || { tail -30 "$logs/audio_adapt.log"; exit 1; }
wait "$decoder" || { tail -30 "$logs/decoder.log"; exit 1; }
ship  # the weights are out before the last (optional, CPU-only) measurement

stamp "measure main + tuned decoder (CPU; nobank and refine are already being measured)"
measure decoder
waitjobs || true
for name in decoder nobank refine; do
    [[ -f $runs/measure_$name/measure.json ]] && cp "$runs/measure_$name/measure.json" \
        "$out/measure_$name.json"
done
[[ -f $runs/measure_decoder/long_play.png ]] && cp "$runs/measure_decoder/long_play.png" "$out/"
kill "$watchdog" "${monitor:-}" 2>/dev/null || true
stamp "done"
