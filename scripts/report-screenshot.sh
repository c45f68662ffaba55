#!/usr/bin/env bash
# Looks at the release report in a real browser: releases the embedded
# census extract's 2-way marginals with --report (and plans them with
# --report) into a scratch directory (with --nonneg, so that the page shows
# both estimates), opens both pages in headless
# Chromium (Debian's `chromium`), and fails if the browser logged a console
# message or the page made any network request (the network log's requests
# initiated by the page; the browser's own are not the page's).
# Writes the screenshots beside the pages and prints their paths.
#
#   scripts/report-screenshot.sh [OUT_DIR]    (default: a new temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
command -v chromium >/dev/null || { echo "needs Debian's chromium (apt-get install chromium)" >&2; exit 2; }
cargo build --release -q -p dpmm
dpmm=target/release/dpmm
rm -f "$out"/ledger.jsonl "$out"/ledger.jsonl.head
"$dpmm" ledger init --ledger "$out/ledger.jsonl" --total-epsilon 2 2>/dev/null
"$dpmm" release --data datasets/fertility1980.csv.gz --schema examples/fertility1980/schema.json \
  --workload examples/fertility1980/spec.json --epsilon 1 --ledger "$out/ledger.jsonl" \
  --out "$out/answers.csv" --report "$out/report.html" --nonneg 2>/dev/null
"$dpmm" plan --workload examples/fertility1980/spec.json --epsilon 1 \
  --out "$out/plan.json" --report "$out/plan.html" >/dev/null
for page in report plan; do
  # The flags keep Chromium from its own background requests, so that the
  # network log shows the page's alone.
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$out/chromium-profile" --window-size=1200,2400 \
    --enable-logging=stderr --v=0 --log-net-log="$out/$page.netlog.json" \
    --screenshot="$out/$page.png" "file://$(realpath "$out/$page.html")" 2>"$out/$page.chromium.log"
  if grep -q "CONSOLE" "$out/$page.chromium.log"; then
    grep "CONSOLE" "$out/$page.chromium.log" >&2
    echo "$page.html: console messages" >&2
    exit 1
  fi
  # Requests the page made carry its (opaque, "null") origin as their
  # initiator; the browser's own carry "not an origin".
  python3 - "$out/$page.netlog.json" <<'PY' || { echo "$page.html: network requests" >&2; exit 1; }
import json, sys
log = json.load(open(sys.argv[1]))
names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
starts = [e.get("params", {}) for e in log["events"]
          if names.get(e["type"]) == "URL_REQUEST_START_JOB"]
made = [p["url"] for p in starts if "url" in p and p.get("initiator") != "not an origin"]
for url in made:
    print(url, file=sys.stderr)
sys.exit(1 if made else 0)
PY
  echo "$out/$page.png ($(stat -c %s "$out/$page.html") bytes of HTML)"
done
