#!/usr/bin/env bash
# Model-checks the delivery (claim tokens), lease (fencing epochs) and queue storage (lanes, cursors,
# segments; state kept with the listing, the design's leading open candidate:
# docs/queue-storage-design.md; and the ready lanes as built in 0.10.0: cursors over consumed runs,
# voids once their lane's mark is settled) protocols with spin: each real model must verify with no
# error, and each deliberately broken variant must be refuted with the violation it was built to show,
# so the properties are known to bite. Prints the states explored.
#   tests/model/check.sh      every model and variant (a few seconds)
# Needs spin and a C compiler. Exit status 0 when every expectation holds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
# run MODEL FLAGS EXPECT: EXPECT is "ok" or a pattern the counterexample's first error line matches.
run() {
  local model=$1 flags=$2 expect=$3 dir out first errors states verdict
  dir="$work/${model%.pml}${flags// /}"
  mkdir -p "$dir" && cp "$here/$model" "$dir/"
  # shellcheck disable=SC2086
  if ! (cd "$dir" && spin -a $flags "$model" >spin.log 2>&1 && gcc -O0 -DSAFETY -o pan pan.c >gcc.log 2>&1); then
    echo "FAIL $model $flags: does not build"; cat "$dir"/*.log; failed=$((failed + 1)); return
  fi
  out=$(cd "$dir" && ./pan -m200000 -w22 2>&1)
  # Read the output with here-strings and bash patterns, not `echo | grep -q`: under pipefail a grep that
  # stops at its first match can fail the pipeline through the writer's SIGPIPE.
  first=$(grep -m1 '^pan:1' <<<"$out")
  errors=$(grep -oE 'errors: [0-9]+' <<<"$out" | grep -oE '[0-9]+')
  states=$(grep -oE '^ *[0-9]+ states, stored' <<<"$out" | grep -oE '[0-9]+')
  if [[ $out == *"depth too small"* ]]; then
    verdict="FAIL (search depth bound reached: the check is incomplete)"
  elif [ "$expect" = ok ]; then
    if [ "${errors:-1}" = 0 ]; then verdict="ok: verified"; else verdict="FAIL: $first"; fi
  elif [ "${errors:-0}" -ge 1 ] && [[ $first == *"$expect"* ]]; then
    verdict="ok: refuted, ${first#pan:1: }"
  else
    verdict="FAIL: expected a counterexample matching '$expect', got errors=${errors:-?}"
  fi
  printf '%-12s %-22s %10s states  %s\n' "$model" "${flags:-(real)}" "${states:-?}" "$verdict"
  case $verdict in ok*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)); tail -n 30 <<<"$out" ;; esac
}

start=$SECONDS
run delivery.pml "" ok
run delivery.pml "-DBROKEN_ACK" 'assertion violated (tok==last_token)'
run delivery.pml "-DBROKEN_TOKEN" 'assertion violated (holder==_pid)'
run delivery.pml "-DBROKEN_REDELIVERY" 'invalid end state'
run lease.pml "" ok
run lease.pml "-DBROKEN_FENCE" 'assertion violated (e==epoch)'
run lease.pml "-DBROKEN_LOCK" 'assertion violated (e==epoch)'
run lease.pml "-DBROKEN_EPOCH" 'assertion violated (epoch>max_granted)'
run segments.pml "" ok
run segments.pml "-DBROKEN_OWN_CLAIM" 'assertion violated (claim_of[p]==0)'
run segments.pml "-DBROKEN_HOLE" 'assertion violated (consumed[p]||voided[p])'
run segments.pml "-DBROKEN_RECHECK" 'assertion violated ((row[p]!=2)||consumed[p])'
run segments.pml "-DBROKEN_WAIT" 'invalid end state'
run listings.pml "" ok
run listings.pml "-DBROKEN_RECEIPT" 'assertion violated (live==0)'
run listings.pml "-DBROKEN_CURSOR" 'assertion violated (cl[q]!=0)'
run listings.pml "-DBROKEN_CURSOR_LOSS" 'assertion violated ( !(made[m])||(acks[m]>0))'
run listings.pml "-DBROKEN_RESCUE" 'assertion violated (acks[m]==0)'
run listings.pml "-DBROKEN_ACK" 'assertion violated (cl[mine]==0)'
run lanes.pml "" ok
run lanes.pml "-DBROKEN_MARK_ORDER" 'assertion violated (entry[p]!=3)'
run lanes.pml "-DBROKEN_LATE_XID" 'assertion violated (entry[p]!=3)'
run lanes.pml "-DBROKEN_GAP_RUN" 'assertion violated ((entry[p]==3)||((entry[p]==2)&&consumed[p]))'
run lanes.pml "-DBROKEN_SNAPSHOT_XMAX" 'assertion violated (entry[p]!=3)'
echo "model check: $passed passed, $failed failed ($((SECONDS - start)) s)"
[ "$failed" -eq 0 ]
