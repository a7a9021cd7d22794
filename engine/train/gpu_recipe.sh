#!/usr/bin/env bash
# GPU recipe v7 (issue 11): the convolutional world model (engine/model/conv_world.py) on one
# 15-minute H200 lease; v5 (v4 plus reference images arriving mid-episode and a carried
# critic) plus a fifth arm, `codes`: the candidate as a code model (MODEL.md, v7 experiments);
# since v7 the regressing and code arms read their history moved by each frame's camera turn
# (--camera-warp, MODEL.md v10).
# Every arm warm-starts from engine/weights/world.pt when that is a conv model, so progress
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
#   generator three arms side by side on the GPU, same data and minutes, batch 256 windows
#             (engine/train/conv_generator.py): `main`, the flow-matching conv denoiser
#             (3 sampler steps) with the Error Bank in 25 % of every batch; `nobank`, the same
#             without it (brightness_drift_no_bank); `regress`, the regressing conv model
#             trained on its own 8-frame chains with the bank (on the CPU it had the best
#             psnr and seams but blurred to mush); `critic`, the same regressor with the
#             latent critic (--adv-weight 0.1: on the CPU 5x the sharpness at h16, at 915
#             steps the texture was not yet the place's). Each prints its throughput. An arm
#             warm-starts from engine/weights/world.pt when that is a conv model of its kind;
#             the two regressing arms start from engine/weights/candidates/conv_critic.pt
#             (`critic` also from the critic beside it, conv_critic.critic.pt, if kept, after
#             50 steps in which only the critic learns), and an eighth of their windows show a
#             reference image arriving (--image-share); `codes`, the code model (--codes 1024:
#             cross-entropy per latent cell over a 1,024-code latent codebook, chains go on
#             from drawn codes, a sound head that reads the last 4 sounds), continuing the
#             shipped world.pt (the code model since stop 23: 1,100 CPU steps, each theme's
#             bands held for a minute, each cell's choice still spread over ~50 codes; a CPU
#             continuation sharpened it and invented colour bands, MODEL.md v8) or, without
#             one, starting from the regressor candidate.
#   measure   every arm on the CPU as soon as it is trained (engine/train/measure.py), JSON and
#             long_play.png into OUT; OUT/gpu.csv samples utilisation and memory every 5 s
#   ship      OUT/weights (main), OUT/nobank, OUT/regress, OUT/critic, OUT/codes: world.pt
#             each (tokenizers unchanged), OUT/critic/critic.pt
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
    runs=runs/gpu_v4 device=auto measure_threads=2 bank="--bank-every 100 --bank-rollouts 64"
fi
workers=${WORKERS:-$(nproc --all)}
arms="main nobank regress critic codes"
data=$runs/data logs=$runs/logs
mkdir -p "$out" "$logs"
stamp() { echo "[$(date +%T)] $*"; }
collect_logs() { for f in "$logs"/*.log; do echo "== $f"; tail -c 2500 "$f"; done > "$out/log.txt"; }
ship() {  # whatever exists
    mkdir -p "$out/weights"
    [[ -f $runs/main/weights/world.pt ]] && cp "$runs/main/weights/world.pt" "$out/weights/"
    for arm in ${arms#main }; do
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
    [[ -f $runs/critic/weights/critic.pt ]] && cp "$runs/critic/weights/critic.pt" "$out/critic/"
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
declare -A arm_args=(
    [main]="--denoise --bank-share 0.25 --unroll 4"
    [nobank]="--denoise --bank-share 0 --unroll 4"
    [regress]="--bank-share 0.25 --unroll 8 --image-share 0.125 --camera-warp"
    [critic]="--bank-share 0.25 --unroll 8 --image-share 0.125 --adv-weight 0.1 --critic-warmup 50 --camera-warp"
    [codes]="--codes 1024 --bank-share 0.25 --unroll 8 --image-share 0.125 --audio-history 4 --camera-warp"
)
# The best CPU-trained conv regressor so far (MODEL.md, v4 experiments) is kept as a
# candidate: the regressing arms start from it instead of from nothing.
candidate=engine/weights/candidates/conv_critic.pt
if [[ -f $candidate ]]; then
    arm_args[regress]+=" --init $candidate"
    arm_args[critic]+=" --init $candidate"
fi
# The code arm continues the shipped code model (world.pt, when it is one: training picks it up
# without --init), else the kept one (its codebook comes along), else starts one from the
# regressor.
shipped_codes=$($py -c "from engine.model.checkpoint import load_payload as p
print(p('$base/world.pt')['config'].get('codes', 0))")
if ((shipped_codes > 0)); then
    :
elif [[ -f engine/weights/candidates/conv_codes.pt ]]; then
    arm_args[codes]+=" --init engine/weights/candidates/conv_codes.pt"
elif [[ -f $candidate ]]; then
    arm_args[codes]+=" --init $candidate"
fi
if [[ -f ${candidate%.pt}.critic.pt ]]; then  # the critic it was trained against, if kept
    arm_args[critic]+=" --init-critic ${candidate%.pt}.critic.pt"
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
