#!/usr/bin/env bash
# Issue 53's hostile cases tried again as a new user would: the real CLI (headless --record, merge,
# the rendezvous with and without its token) against the hostile peers the tests already have
# (tests/reliability/hostile_peers.py), all on loopback. For each case: the line it ends with, its
# exit code, whether a traceback was printed, and whether every recording on disk before it (and
# the case's own) is still there, byte for byte, and exports to JSON. Everything goes under OUT
# (default /tmp/tryout_hostile); OUT/cases.tsv is the table, one row a case; CASES (names, spaces
# between) picks some. Exit 1 if any case misbehaved.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/tryout_hostile}
PY=${PY:-.venv/bin/python}
CASES=${CASES:-"baseline bad-setting ping-flood settings-flood huffman counts-grpc counts-sse sse-size-line sse-nested mostly-failed merge-twice merge-copy merge-remeasured merge-together rendezvous-no-token rendezvous-wrong-token rendezvous-intruder rendezvous-token"}
rm -rf "$OUT" && mkdir -p "$OUT/rec" "$OUT/export" "$OUT/peers" "$OUT/merged"
REC=$OUT/rec
QUICK=(--no-check --set load.window_ms=400 --set load.warmup_s=0.3 --set load.max_windows=4 --set load.workers=1
       --set load.max_trials=1 --set load.contended_percent=100 --set load.request_timeout_s=3 --set load.concurrency=1,2)
G=("$PY" -m tui.cli)
HOSTS=(--set load.concurrency=2,4 --hosts 2)  # a level needs a connection per host
peer_pids=()
trap 'for p in "${peer_pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
printf 'case\tcommand\tline printed\texit\ttraceback\trecordings intact\n' >"$OUT/cases.tsv"
bad=0

peer() {  # peer CASE: start the hostile peer, set URL
  "$PY" -m tests.reliability.hostile_peers "$1" >"$OUT/peers/$1.txt" 2>&1 &
  peer_pids+=($!)
  for _ in $(seq 300); do URL=$(head -1 "$OUT/peers/$1.txt" 2>/dev/null); [[ $URL == http* ]] && return; sleep 0.1; done
  echo "peer $1 did not start: $(cat "$OUT/peers/$1.txt")" >&2; exit 2
}

snapshot() { (cd "$REC" && sha256sum -- *.sqlite 2>/dev/null) | sort -k2 >"$OUT/before.sha"; }

intact() {  # every recording before the case unchanged, and every recording now exports to JSON
  local ok=yes f
  while read -r sum f; do
    [ "$(sha256sum <"$REC/$f" 2>/dev/null | cut -d' ' -f1)" = "$sum" ] || { ok="no: $f changed or gone"; break; }
  done <"$OUT/before.sha"
  for f in "$REC"/*.sqlite; do
    [ -e "$f" ] || continue
    "${G[@]}" export "$f" --format json --out "$OUT/export" >/dev/null 2>"$OUT/export/last_err.txt" \
      || { ok="no: $(basename "$f") does not export: $(tail -1 "$OUT/export/last_err.txt")"; break; }
  done
  echo "$ok"
}

case_done() {  # case_done NAME WANT_EXIT COMMAND_WORDS (the output is in OUT/NAME.out, .err, .rc)
  local name=$1 want=$2 words=$3 rc line tb rec_ok
  rc=$(cat "$OUT/$name.rc")
  line=$(grep -v '^\s*$' "$OUT/$name.err" | tail -1)
  [ -n "$line" ] || line=$(grep -v '^\s*$' "$OUT/$name.out" | tail -1)
  tb=no; grep -q "Traceback" "$OUT/$name.out" "$OUT/$name.err" && tb=yes
  rec_ok=$(intact)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$words" "$line" "$rc" "$tb" "$rec_ok" >>"$OUT/cases.tsv"
  echo "$name: exit $rc (want $want), traceback $tb, recordings intact: $rec_ok | $line"
  if [ "$rc" != "$want" ] || [ "$tb" = yes ] || [ "$rec_ok" != yes ]; then bad=1; fi
}

run_case() {  # run_case NAME WANT_EXIT WORDS CMD...: run, keep stdout, stderr, exit code
  local name=$1 want=$2 words=$3; shift 3
  snapshot
  timeout -k 10 300 "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  echo $? >"$OUT/$name.rc"
  case_done "$name" "$want" "$words"
}

sweep_case() {  # sweep_case NAME PEER TRANSPORT: a headless recorded run against the peer
  peer "$2"
  run_case "$1" 1 "run --record --url (peer $2) load.transport=$3" \
    "${G[@]}" run --record -o "$REC" --url "$URL" --set model.name=toy --set load.transport="$3" \
    --set load.tokens_from=COUNT "${QUICK[@]}"
  local own; own=$(grep -o 'recording: .*\.sqlite' "$OUT/$1.out" | cut -d' ' -f2)
  if [ -n "$own" ]; then  # the case's own recording keeps what was measured: its levels replay
    "${G[@]}" replay --headless "$own" >"$OUT/$1.replay" 2>&1
    echo "$1: own recording $(basename "$own"), replay exit $?, $(grep -c '^level ' "$OUT/$1.replay") level rows"
  else
    echo "$1: no recording named in its output"; bad=1
  fi
}

for c in $CASES; do
  case $c in
    baseline)  # two recordings of one plan before any hostile case: what must not be lost
      peer ok
      for i in 1 2; do
        run_case "baseline$i" 0 "run --record --url (a fake Triton that behaves)" \
          "${G[@]}" run --record -o "$REC" --url "$URL" --set model.name=m "${QUICK[@]}"
      done
      mapfile -t BASE < <(ls "$REC"/*.sqlite) ;;
    bad-setting|ping-flood|settings-flood|huffman|counts-grpc) sweep_case "$c" "$c" grpc_stream ;;
    counts-sse|sse-size-line|sse-nested|mostly-failed) sweep_case "$c" "$c" generate_stream ;;
    merge-twice)
      run_case "$c" 2 "merge A A" "${G[@]}" merge "${BASE[0]}" "${BASE[0]}" -o "$OUT/merged/twice.sqlite" ;;
    merge-copy)  # a byte copy in another folder, caught by a glob
      mkdir -p "$OUT/copies" && cp "${BASE[0]}" "$OUT/copies/"
      run_case "$c" 2 "merge A B copy-of-A (a glob)" "${G[@]}" merge "${BASE[@]}" "$OUT"/copies/*.sqlite \
        -o "$OUT/merged/copy.sqlite" ;;
    merge-remeasured)  # two made-up hosts of one plan; b measured its last level twice
      "$PY" -m tests.reliability.hostile_peers recordings "$OUT/hosts" >/dev/null
      run_case "$c" 0 "merge a b (b re-measured level 4)" "${G[@]}" merge "$OUT/hosts/a.sqlite" "$OUT/hosts/b.sqlite" \
        -o "$OUT/merged/remeasured.sqlite"
      "${G[@]}" export "$OUT/merged/remeasured.sqlite" --format json --out "$OUT/export" >/dev/null 2>&1 \
        || { echo "$c: the merged recording does not export"; bad=1; } ;;
    merge-together)  # two runs of one plan started together on this box, then merged
      peer ok
      mkdir -p "$OUT/together/a" "$OUT/together/b"
      start_at=$(( $(date +%s) + 15 ))
      pair=()
      for h in a b; do
        "${G[@]}" run --record -o "$OUT/together/$h" --url "$URL" --set model.name=m "${QUICK[@]}" \
          --set load.max_trials=3 --set load.start_at="$start_at" >"$OUT/together_$h.out" 2>&1 &
        pair+=($!)
      done
      wait "${pair[@]}"
      run_case "$c" 0 "merge (two runs started together, load.max_trials=3)" "${G[@]}" merge \
        "$OUT"/together/a/*.sqlite "$OUT"/together/b/*.sqlite -o "$OUT/merged/together.sqlite" ;;
    rendezvous-no-token)
      run_case "$c" 2 "run --hosts 2 --rank 1 (no token)" env -u GPUSCALE_RENDEZVOUS_TOKEN "${G[@]}" run --record \
        -o "$REC" --url http://127.0.0.1:9 --set model.name=m "${QUICK[@]}" "${HOSTS[@]}" --rank 1 \
        --rendezvous 127.0.0.1:"$(( 20000 + RANDOM % 20000 ))" --rendezvous-timeout 5 ;;
    rendezvous-wrong-token|rendezvous-intruder|rendezvous-token)
      peer ok
      port=$(( 20000 + RANDOM % 20000 ))
      snapshot
      env -u GPUSCALE_RENDEZVOUS_TOKEN "${G[@]}" run --record -o "$REC" --url "$URL" --set model.name=m \
        "${QUICK[@]}" "${HOSTS[@]}" --rank 0 --rendezvous 127.0.0.1:"$port" --rendezvous-timeout 60 \
        >"$OUT/$c.head.out" 2>"$OUT/$c.head.err" &
      head_pid=$!
      for _ in $(seq 600); do grep -q "rendezvous token: " "$OUT/$c.head.err" "$OUT/$c.head.out" 2>/dev/null && break; sleep 0.1; done
      token=$(grep -ho 'rendezvous token: [^ ]*' "$OUT/$c.head.err" "$OUT/$c.head.out" | head -1 | cut -d' ' -f3)
      for _ in $(seq 300); do ss -ltn | grep -q ":$port " && break; sleep 0.1; done
      ss -ltn | grep ":$port " | awk '{print "listening on " $4}' >"$OUT/$c.listen.txt"
      case $c in
        rendezvous-wrong-token) member=(env -u GPUSCALE_RENDEZVOUS_TOKEN "${G[@]}" run --record -o "$REC" --url "$URL"
                                        --set model.name=m "${QUICK[@]}" "${HOSTS[@]}" --rank 1
                                        --rendezvous 127.0.0.1:"$port" --rendezvous-token not-the-heads); want=2 ;;
        rendezvous-token) member=(env GPUSCALE_RENDEZVOUS_TOKEN="$token" "${G[@]}" run --record -o "$OUT/member"
                                  --url "$URL" --set model.name=m "${QUICK[@]}" "${HOSTS[@]}" --rank 1
                                  --rendezvous 127.0.0.1:"$port"); want=0 ;;
        rendezvous-intruder) member=("$PY" -c "import sys; from engine.multihost.store import StoreClient
s = StoreClient('127.0.0.1', int(sys.argv[1]), 20.0)
s.set('hello/1', 'anyone can write here'); print('wrote hello/1 into the head\'s store')" "$port"); want=0 ;;
      esac
      timeout -k 10 120 "${member[@]}" >"$OUT/$c.member.out" 2>"$OUT/$c.member.err"
      echo $? >"$OUT/$c.member.rc"
      wait "$head_pid"; echo $? >"$OUT/$c.head.rc"
      for side in head member; do cp "$OUT/$c.$side.out" "$OUT/$c-$side.out"; cp "$OUT/$c.$side.err" "$OUT/$c-$side.err"
                                  cp "$OUT/$c.$side.rc" "$OUT/$c-$side.rc"; done
      head_want=2; [ "$c" = rendezvous-token ] && head_want=0
      [ "$c" = rendezvous-intruder ] && want=0
      case_done "$c-head" "$head_want" "run --hosts 2 --rank 0 (the head; $(cat "$OUT/$c.listen.txt"))"
      case_done "$c-member" "$want" "${c#rendezvous-}: member or intruder"
      [ "$c" = rendezvous-token ] && ! grep -rq -- "$token" "$REC" "$OUT/member" 2>/dev/null \
        && echo "$c: the token is in no recording" ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done
column -t -s $'\t' "$OUT/cases.tsv" >"$OUT/cases.txt"
exit "$bad"
