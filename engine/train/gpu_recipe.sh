#!/usr/bin/env bash
# One short GPU lease, start to shipped weights (what produced engine/weights; README "Model").
#
#   bash engine/train/gpu_recipe.sh OUT_DIR [TEXT_TABLE]
#
# Timeline on one H200 + 16 cores (about 8 minutes): simulator data on every core; the audio
# tokenizer and two video tokenizers (with and without the patch discriminator) side by side on
# the GPU; the sharper video tokenizer is kept unless it costs more than 0.7 dB; latents; the
# generator with rollout training; fp16 weights, loss curves and a sample rollout into OUT_DIR.
# TEXT_TABLE comes from `python -m engine.train text-table` on a machine with the text encoder.
# Minutes are overridable (DATA_EPISODES, AE_MINUTES, GEN_MINUTES) for a CPU smoke run.
set -euo pipefail
out=${1:?usage: gpu_recipe.sh OUT_DIR [TEXT_TABLE]}
table=${2:-runs/text_table.npz}
py=${PYTHON:-python3}
episodes=${DATA_EPISODES:-256}
frames=${DATA_FRAMES:-600}
ae_minutes=${AE_MINUTES:-2.5}
gen_minutes=${GEN_MINUTES:-3.5}
workers=${WORKERS:-$(nproc)}
logs=runs/logs
mkdir -p "$out" "$logs"
stamp() { echo "[$(date +%T)] $*"; }
# Everything the lease returns: log.txt, three PNGs, weights/ (a device lease returns 8 files).
collect_logs() { for f in "$logs"/*.log; do echo "== $f"; tail -c 3000 "$f"; done > "$out/log.txt"; }
trap collect_logs EXIT
# If the lease's limit draws near, ship the generator's latest checkpoint rather than nothing.
( sleep "${DEADLINE_S:-540}"; echo "deadline: shipping the latest checkpoint"
  mkdir -p "$out/weights"; $py -m engine.train ship --preset gpu --dest "$out/weights"
  collect_logs ) &
watchdog=$!

stamp "data: $episodes episodes x $frames frames on $workers workers"
$py -m engine.data generate --out data/wm_gpu --episodes "$episodes" --frames "$frames" \
    --workers "$workers" --episodes-per-shard 4 --prompt-rate 0.033 --quiet

stamp "tokenizers: audio, video (plain) and video (adversarial) in parallel"
$py -m engine.train audio --preset gpu --minutes "$ae_minutes" > "$logs/audio_ae.log" 2>&1 &
audio=$!
$py -m engine.train video --preset gpu --minutes "$ae_minutes" --adv-weight 0 \
    --out runs/video_plain > "$logs/video_plain.log" 2>&1 &
plain=$!
$py -m engine.train video --preset gpu --minutes "$ae_minutes" \
    --out runs/video_adv > "$logs/video_adv.log" 2>&1 &
adv=$!
for job in "audio:$audio:audio_ae" "plain:$plain:video_plain" "adv:$adv:video_adv"; do
    IFS=: read -r name pid log <<< "$job"
    wait "$pid" || { echo "$name tokenizer failed:"; tail -30 "$logs/$log.log"; exit 1; }
done
tail -c 600 "$logs/audio_ae.log"; tail -c 600 "$logs/video_plain.log"; tail -c 600 "$logs/video_adv.log"
$py - <<'PY'
import json, shutil
from pathlib import Path
plain = json.loads(Path("runs/video_plain/video_quality.json").read_text())
adv = json.loads(Path("runs/video_adv/video_quality.json").read_text())
pick = "video_adv" if adv["psnr"] >= plain["psnr"] - 0.7 else "video_plain"
print(json.dumps({"plain": plain, "adv": adv, "picked": pick}))
for name in ("video_ae_final.pt", "video_recon.png", "video_loss.png", "video_quality.json"):
    shutil.copy(Path("runs") / pick / name, Path("runs/tokenizers_gpu") / name)
PY
cp runs/tokenizers_gpu/video_recon.png "$out/"

stamp "generator"
$py -m engine.train generator --preset gpu --minutes "$gen_minutes" --text-table "$table" \
    > "$logs/generator.log" 2>&1 || { tail -30 "$logs/generator.log"; exit 1; }
tail -c 2000 "$logs/generator.log"

stamp "ship"
mkdir -p "$out/weights"
$py -m engine.train ship --preset gpu --dest "$out/weights"
cp runs/generator_gpu/loss.png "$out/generator_loss.png"
cp "$(ls runs/generator_gpu/rollout_*.png | tail -1)" "$out/rollout.png"
kill "$watchdog" 2>/dev/null || true
stamp "done"
