#!/bin/bash
# smoke_test.sh [KERNEL]: a quick check of kernel.bash with nothing but bash and coreutils (for
# images without python, e.g. `docker run --rm -v "$PWD/kernels/bash:/k" -w /k --user 1000
# debian:bookworm-slim bash smoke_test.sh`). The full suite is test_kernel.py.
set -u
K=${1:-$(dirname "$0")/kernel.bash}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
set -m # each kernel gets its own process group, as under the agent
fails=0 n=0
ok() { n=$((n + 1)); if [[ $2 == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: got [$2] want [$3]"; fails=$((fails + 1)); fi; }

# start [RESTORE-FILE]: starts a kernel; fd 7 writes requests, fd 8 reads events.
start() {
	rm -f "$d/ctl" "$d/ev" "$d/out" "$d/err" "$d/snap"
	mkfifo "$d/ctl" "$d/ev"
	: >"$d/snap"
	if [[ -n ${1-} ]]; then
		RUNTIMECTL_RESTORE_FD=6 bash --noprofile --norc "$K" 3<"$d/ctl" 4>"$d/ev" 5>"$d/snap" 6<"$1" \
			</dev/null >"$d/out" 2>"$d/err" &
	else
		bash --noprofile --norc "$K" 3<"$d/ctl" 4>"$d/ev" 5>"$d/snap" </dev/null >"$d/out" 2>"$d/err" &
	fi
	kpid=$!
	exec 7>"$d/ctl" 8<"$d/ev"
	IFS= read -r -t 20 ready <&8
	outpos=0 errpos=0 seq=0
}

# run CODE-AS-JSON-STRING-CONTENT [INTERRUPT-AFTER]: sets out, err, done.
run() {
	seq=$((seq + 1))
	local nonce
	nonce=$(printf '%032x' "$seq$RANDOM")
	# as the agent sends it (agent/driver.go: driverRequest's fields in order)
	printf '{"op":"exec","id":"r%d","seq":%d,"code":"%s","nonce":"%s","sync":"%s","session":"smoke"}\n' "$seq" "$seq" "$1" "$nonce" "$nonce" >&7
	if [[ -n ${2-} ]]; then sleep "$2"; kill -INT -- "-$kpid"; fi
	done=
	IFS= read -r -t 30 done <&8
	local o e
	o=$(tail -c +$((outpos + 1)) "$d/out"; printf x)
	e=$(tail -c +$((errpos + 1)) "$d/err"; printf x)
	o=${o%x} e=${e%x}
	bytes "$o"; outpos=$((outpos + nb))
	bytes "$e"; errpos=$((errpos + nb))
	out=${o%"$nonce"} err=${e%"$nonce"}
	[[ $o == *"$nonce" && $e == *"$nonce" ]] || { out="<no nonce: $o>"; err="<no nonce: $e>"; }
}
bytes() { local LC_ALL=C; nb=${#1}; }
st() { [[ $done =~ \"status\":\"([a-z]+)\" ]] && echo "${BASH_REMATCH[1]}"; }

export LC_ALL=C.UTF-8
start
ok ready "${ready:0:16}" '{"op":"ready","p'
run 'cd /tmp; X=41; f() { echo $((X+1)); }; a=(x \"y z\"); declare -A m=([k]=v); alias hi=\u0027echo hi-alias\u0027; export E=1; set -o pipefail'
ok "exec ok" "$(st)" ok
run 'pwd; f; echo ${a[1]} ${m[k]}; hi; bash -c \u0027echo E=$E\u0027; false | true; echo pf=$?'
ok "state persists" "$out" $'/tmp\n42\ny z v\nhi-alias\nE=1\npf=1\n'
run 'false'
ok "false -> error" "$done" '{"op":"done","id":"r3","status":"error","result":null,"error":{"name":"ExitStatus","value":"1","traceback":""},"outputs":[],"changed":false}'
run 'echo out; echo err \u003e\u00262; printf \u0027%s\\n\u0027 \"\\$ \\` \\\\ \u00e9 \ud83d\ude00\"; cat \u003c\u003cEOF\nline $X\nEOF'
ok "stdout" "$out" $'out\n$ ` \\ é 😀\nline 41\n'
ok "stderr" "$err" $'err\n'
run 'read x; echo rc=$?'
ok "stdin is EOF" "$out" $'rc=1\n'
run 'sleep 100; echo after' 0.5
ok "interrupt sleep" "$(st):$out" "interrupted:"
run 'while true; do :; done; echo after' 0.5
ok "interrupt loop" "$(st):$out" "interrupted:"
run 'echo alive'
ok "alive after interrupts" "$out" $'alive\n'
run 'Y=1'
ok "changed after Y=1" "${done##*\"changed\":}" 'true}'
run 'echo hi'
ok "unchanged after echo" "${done##*\"changed\":}" 'false}'
printf '{"id":"s1","op":"snapshot"}\n' >&7
IFS= read -r -t 20 ev <&8
ok "snapshot_started" "$ev" "{\"op\":\"snapshot_started\",\"id\":\"s1\",\"pid\":$kpid}"
sleep 0.2
{
	IFS= read -r len
	head -c "$len" >"$d/state"
} <"$d/snap"
ok "snapshot terminator" "$(tail -c +$((${#len} + 2 + len)) "$d/snap" | head -n 1)" 0
manifest=$(tail -c +$((${#len} + 2 + len + 2)) "$d/snap" | tail -n +2)
[[ $manifest == *'"ok":true'* && $manifest == *'"format":"bash-state-v1"'* ]] && manifest=ok
ok "manifest" "$manifest" ok
exec 7>&-
wait "$kpid"
ok "EOF ends the kernel" "$?" 0
exec 8<&-

start "$d/state"
ok "restore ready" "$([[ $ready == *'"restored":['*'"X"'* && $ready == *'"failed":[]'* ]] && echo yes)" yes
run 'pwd; f; echo ${a[1]} ${m[k]}; hi; bash -c \u0027echo E=$E\u0027; false | true; echo pf=$?'
ok "restored state" "$out" $'/tmp\n42\ny z v\nhi-alias\nE=1\npf=1\n'
run 'echo bye; exit 3'
wait "$kpid"
ok "exit 3" "$?" 3
exec 7>&- 8<&-

echo "$((n - fails))/$n passed"
((fails == 0))
